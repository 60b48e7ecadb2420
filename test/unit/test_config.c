/* test_config.c: cmocka tests for src/config/config.c and the profile loading in
 * src/hooks/profile.c: the embedded default, a full valid config, strict rejection of unknown keys
 * and bad values with messages naming the key, and profiles overriding or adding infra kinds. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "profile.h"
#include "settings.h"
#include "testutil.h"

#define GROUP "infrastructure.cluster.x-k8s.io"

/* A valid vSphere server entry and a valid profile, to embed in bad documents. */
#define SERVER                                                                                     \
    "{\"name\":\"vc\",\"url\":\"https://vc.example.com/sdk\",\"usernameFile\":\"/etc/u\","         \
    "\"passwordFile\":\"/etc/pw\"}"
#define PROFILE                                                                                    \
    "{\"kind\":\"KVMMachine\",\"backend\":\"libvirt\",\"fields\":{\"memory\":{\"path\":"           \
    "\"/memoryMiB\",\"unit\":\"MiB\"}},\"identity\":{\"byName\":true}}"

static const char full_config[] =
    "{\n"
    "  \"$schema\": \"https://hvupdater.dev/schemas/config.json\",\n"
    "  \"listen\": \"0.0.0.0:9443\",\n"
    "  \"maxBodyBytes\": 1048576,\n"
    "  \"handlerTimeoutSeconds\": 30,\n"
    "  \"defaults\": {\"powerCycle\": \"Never\", \"onUncoverable\": \"Block\",\n"
    "               \"powerOffMode\": \"Hard\"},\n"
    "  \"engine\": {\"workers\": 8, \"maxConcurrentPowerCycles\": 10, \"maxPowerCyclesPerHost\": "
    "2,\n"
    "             \"liveTimeoutSeconds\": 90, \"shutdownTimeoutSeconds\": 240,\n"
    "             \"stepTimeoutSeconds\": 60, \"deadlineSeconds\": 3600},\n"
    "  \"libvirt\": {\"uris\": [\"qemu:///system\", \"qemu+ssh://root@kvm1.example.com/system\"],\n"
    "              \"keepaliveIntervalSeconds\": 7, \"keepaliveCount\": 4,\n"
    "              \"connectTimeoutSeconds\": 3},\n"
    "  \"vsphere\": {\"servers\": [\n"
    "    {\"name\": \"vcenter.example.com\", \"url\": \"https://vcenter.example.com/sdk\",\n"
    "     \"usernameFile\": \"/etc/hvupdater/vsphere/username\",\n"
    "     \"passwordFile\": \"/etc/hvupdater/vsphere/password\",\n"
    "     \"thumbprint\": \"5C:9E:2B:61:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF\", "
    "\"caFile\": \"/etc/hvupdater/vsphere/ca.pem\",\n"
    "     \"insecureSkipVerify\": false},\n"
    "    {\"name\": \"lab\", \"url\": \"https://127.0.0.1:8989/sdk\",\n"
    "     \"usernameFile\": \"/run/user\", \"passwordFile\": \"/run/pw\", \"insecureSkipVerify\": "
    "true}]},\n"
    "  \"profiles\": [\n"
    "    {\"kind\": \"LibvirtMachine\", \"apiGroup\": \"infrastructure.cluster.x-k8s.io\",\n"
    "     \"apiVersions\": [\"v1alpha1\"], \"template\": false, \"backend\": \"libvirt\",\n"
    "     \"fields\": {\"memory\": {\"path\": \"/memoryMiB\", \"unit\": \"MiB\"},\n"
    "                \"cpus\": {\"path\": \"/cpus\"}, \"coresPerSocket\": {\"path\": "
    "\"/coresPerSocket\"}},\n"
    "     \"identity\": {\"providerIDPrefix\": \"libvirt://\", \"byName\": true, \"serverPath\": "
    "\"/uri\"}},\n"
    "    {\"kind\": \"KVMMachineTemplate\", \"apiGroup\": \"infrastructure.example.com\",\n"
    "     \"apiVersions\": [\"v1beta1\", \"v1beta2\"], \"template\": true, \"backend\": "
    "\"libvirt\",\n"
    "     \"fields\": {\"memory\": {\"path\": \"/resources/memoryGiB\", \"unit\": \"GiB\"},\n"
    "                \"cpus\": {\"path\": \"/resources/vcpus\"}},\n"
    "     \"identity\": {\"providerIDPrefix\": \"libvirt://\", \"serverPath\": "
    "\"/hypervisor/uri\"}}\n"
    "  ]\n"
    "}\n";

/* Parse text over the defaults; expect success. Caller frees. */
static void parse_ok(struct hv_config *c, const char *text)
{
    char err[512] = "";
    hv_config_default(c);
    if (hv_config_parse(c, text, strlen(text), err, sizeof(err)) != 0)
        fail_msg("config rejected: %s\n%s", err, text);
}

/* Parse text; expect failure with exactly msg; the config stays freeable. */
static void parse_fails(const char *text, const char *msg)
{
    struct hv_config c;
    char err[512] = "";
    hv_config_default(&c);
    if (hv_config_parse(&c, text, strlen(text), err, sizeof(err)) == 0) {
        hv_config_free(&c);
        fail_msg("config accepted, want \"%s\": %s", msg, text);
    }
    if (strcmp(err, msg) != 0) {
        hv_config_free(&c);
        fail_msg("config %s\n  got  \"%s\"\n  want \"%s\"", text, err, msg);
    }
    hv_config_free(&c);
}

static void check_default_values(const struct hv_config *c, bool embedded)
{
    assert_null(c->listen);
    assert_int_equal(c->max_body, 4194304);
    assert_int_equal(c->handler_timeout_s, 10);
    assert_int_equal(c->defaults.power_cycle, HV_PC_IF_NEEDED);
    assert_int_equal(c->defaults.on_uncoverable, HV_UNC_FALLBACK);
    assert_int_equal(c->defaults.power_off_mode, HV_POM_TRY_SOFT);
    assert_int_equal(c->defaults.live_timeout_s, 120);
    assert_int_equal(c->defaults.shutdown_timeout_s, 300);
    assert_int_equal(c->defaults.deadline_s, 1800);
    assert_int_equal(c->engine.workers, 4);
    assert_int_equal(c->engine.max_power_cycles, 4);
    assert_int_equal(c->engine.max_power_cycles_per_host, 1);
    assert_int_equal(c->engine.step_timeout_s, 300);
    if (embedded) {
        assert_int_equal(c->n_libvirt_uris, 1);
        assert_string_equal(c->libvirt_uris[0], "test:///default");
    } else {
        assert_int_equal(c->n_libvirt_uris, 0); /* a config file names its own hosts */
    }
    assert_int_equal(c->keepalive_interval_s, 5);
    assert_int_equal(c->keepalive_count, 3);
    assert_int_equal(c->connect_timeout_s, 10);
    assert_int_equal(c->n_vsphere, 0);
    assert_int_equal(c->profiles.n, 6); /* vSphere, libvirt, KubeVirt: machine and template */
}

/* ---- the embedded default --------------------------------------------------------------- */

static void test_default_config(void **state)
{
    struct hv_config c;
    hv_config_default(&c);
    check_default_values(&c, true);

    const struct hv_profile *vs = hv_profile_find(&c.profiles, GROUP "/v1beta1", "VSphereMachine");
    assert_non_null(vs);
    assert_true(vs == hv_profile_find(&c.profiles, GROUP "/v1beta2", "VSphereMachine"));
    assert_null(hv_profile_find(&c.profiles, GROUP "/v1alpha3", "VSphereMachine"));
    assert_false(vs->is_template);
    assert_string_equal(vs->backend, "vsphere");
    assert_string_equal(vs->field[HV_F_MEMORY].path, "/memoryMiB");
    assert_int_equal(vs->field[HV_F_MEMORY].unit, HV_UNIT_MIB);
    assert_string_equal(vs->field[HV_F_CPUS].path, "/numCPUs");
    assert_string_equal(vs->field[HV_F_CORES].path, "/numCoresPerSocket");
    assert_string_equal(hv_field_name(vs, HV_F_CORES), "numCoresPerSocket");
    assert_string_equal(vs->providerid_prefix, "vsphere://");
    assert_false(vs->by_name);
    assert_string_equal(vs->server_path, "/server");
    assert_string_equal(hv_profile_spec_root(vs), "/spec");

    const struct hv_profile *vst =
        hv_profile_find(&c.profiles, GROUP "/v1beta1", "VSphereMachineTemplate");
    assert_non_null(vst);
    assert_true(vst->is_template);
    assert_string_equal(hv_profile_spec_root(vst), "/spec/template/spec");

    const struct hv_profile *lv = hv_profile_find(&c.profiles, GROUP "/v1alpha1", "LibvirtMachine");
    assert_non_null(lv);
    assert_true(lv == hv_profile_find(&c.profiles, GROUP "/v1beta9", "LibvirtMachine"));
    assert_string_equal(lv->backend, "libvirt");
    assert_string_equal(lv->field[HV_F_CPUS].path, "/vcpu");
    assert_string_equal(hv_field_name(lv, HV_F_CPUS), "vcpu");
    assert_false(lv->field[HV_F_CORES].set);
    assert_true(lv->by_name);
    assert_string_equal(lv->providerid_prefix, "libvirt://");
    const struct hv_profile *lvt =
        hv_profile_find(&c.profiles, GROUP "/v1alpha1", "LibvirtMachineTemplate");
    assert_non_null(lvt);
    assert_true(lvt->is_template);

    /* group, kind and apiVersion shape must all match */
    assert_null(
        hv_profile_find(&c.profiles, "infrastructure.example.com/v1beta1", "VSphereMachine"));
    assert_null(
        hv_profile_find(&c.profiles, "infrastructure.cluster.x-k8s.io/v1beta1", "FooMachine"));
    assert_null(hv_profile_find(&c.profiles, "infrastructure.cluster.x-k8s.io", "LibvirtMachine"));
    assert_null(hv_profile_find(&c.profiles, "v1beta1", "VSphereMachine"));
    assert_null(
        hv_profile_find(&c.profiles, "infrastructure.cluster.x-k8s.i/v1beta1", "VSphereMachine"));
    assert_null(hv_profile_find(&c.profiles, "infrastructure.cluster.x-k8s.io.x/v1beta1",
                                "VSphereMachine"));
    assert_null(hv_profile_find(&c.profiles, NULL, "VSphereMachine"));
    assert_null(hv_profile_find(&c.profiles, GROUP "/v1beta1", NULL));
    assert_null(hv_profile_find(&c.profiles, GROUP "/v1beta1", "vspheremachine"));
    hv_config_free(&c);
}

static void test_empty_config_keeps_defaults(void **state)
{
    struct hv_config c;
    parse_ok(&c, "{}");
    check_default_values(&c, false);
    hv_config_free(&c);
    parse_ok(&c, " {\"$schema\":\"x\"} \n");
    check_default_values(&c, false);
    hv_config_free(&c);
}

/* ---- a full valid config ---------------------------------------------------------------- */

static void test_full_config(void **state)
{
    struct hv_config c;
    parse_ok(&c, full_config);
    assert_string_equal(c.listen, "0.0.0.0:9443");
    assert_int_equal(c.max_body, 1048576);
    assert_int_equal(c.handler_timeout_s, 30);
    assert_int_equal(c.defaults.power_cycle, HV_PC_NEVER);
    assert_int_equal(c.defaults.on_uncoverable, HV_UNC_BLOCK);
    assert_int_equal(c.defaults.power_off_mode, HV_POM_HARD);
    assert_int_equal(c.defaults.live_timeout_s, 90);
    assert_int_equal(c.defaults.shutdown_timeout_s, 240);
    assert_int_equal(c.defaults.deadline_s, 3600);
    assert_int_equal(c.engine.workers, 8);
    assert_int_equal(c.engine.max_power_cycles, 10);
    assert_int_equal(c.engine.max_power_cycles_per_host, 2);
    assert_int_equal(c.engine.step_timeout_s, 60);
    assert_int_equal(c.n_libvirt_uris, 2);
    assert_string_equal(c.libvirt_uris[0], "qemu:///system");
    assert_string_equal(c.libvirt_uris[1], "qemu+ssh://root@kvm1.example.com/system");
    assert_int_equal(c.keepalive_interval_s, 7);
    assert_int_equal(c.keepalive_count, 4);
    assert_int_equal(c.connect_timeout_s, 3);

    assert_int_equal(c.n_vsphere, 2);
    assert_string_equal(c.vsphere[0].name, "vcenter.example.com");
    assert_string_equal(c.vsphere[0].url, "https://vcenter.example.com/sdk");
    assert_string_equal(c.vsphere[0].username_file, "/etc/hvupdater/vsphere/username");
    assert_string_equal(c.vsphere[0].password_file, "/etc/hvupdater/vsphere/password");
    assert_string_equal(c.vsphere[0].thumbprint,
                        "5C:9E:2B:61:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF");
    assert_string_equal(c.vsphere[0].ca_file, "/etc/hvupdater/vsphere/ca.pem");
    assert_false(c.vsphere[0].insecure_skip_verify);
    assert_string_equal(c.vsphere[1].name, "lab");
    assert_string_equal(c.vsphere[1].username_file, "/run/user");
    assert_null(c.vsphere[1].thumbprint);
    assert_null(c.vsphere[1].ca_file);
    assert_true(c.vsphere[1].insecure_skip_verify);

    /* LibvirtMachine overridden in place, KVMMachineTemplate added */
    assert_int_equal(c.profiles.n, 7);
    const struct hv_profile *lv = hv_profile_find(&c.profiles, GROUP "/v1alpha1", "LibvirtMachine");
    assert_non_null(lv);
    assert_null(hv_profile_find(&c.profiles, GROUP "/v1beta1", "LibvirtMachine"));
    assert_string_equal(lv->field[HV_F_CPUS].path, "/cpus");
    assert_true(lv->field[HV_F_CORES].set);
    assert_string_equal(lv->field[HV_F_CORES].path, "/coresPerSocket");
    assert_string_equal(lv->server_path, "/uri");
    assert_true(lv->by_name);
    assert_false(lv->is_template);
    /* the template built-in is untouched */
    const struct hv_profile *lvt =
        hv_profile_find(&c.profiles, GROUP "/v1beta1", "LibvirtMachineTemplate");
    assert_non_null(lvt);
    assert_string_equal(lvt->field[HV_F_CPUS].path, "/vcpu");

    const struct hv_profile *kvm =
        hv_profile_find(&c.profiles, "infrastructure.example.com/v1beta2", "KVMMachineTemplate");
    assert_non_null(kvm);
    assert_true(kvm == hv_profile_find(&c.profiles, "infrastructure.example.com/v1beta1",
                                       "KVMMachineTemplate"));
    assert_null(hv_profile_find(&c.profiles, GROUP "/v1beta1", "KVMMachineTemplate"));
    assert_true(kvm->is_template);
    assert_string_equal(kvm->backend, "libvirt");
    assert_string_equal(kvm->field[HV_F_MEMORY].path, "/resources/memoryGiB");
    assert_int_equal(kvm->field[HV_F_MEMORY].unit, HV_UNIT_GIB);
    assert_string_equal(hv_field_name(kvm, HV_F_MEMORY), "memoryGiB");
    assert_false(kvm->field[HV_F_CORES].set);
    assert_false(kvm->by_name);
    assert_string_equal(kvm->server_path, "/hypervisor/uri");
    hv_config_free(&c);
    assert_null(c.libvirt_uris); /* freed and cleared */
}

static void test_load_file(void **state)
{
    char path[] = "/tmp/hv-test-config-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t len = strlen(full_config);
    assert_int_equal(write(fd, full_config, len), (ssize_t)len);
    close(fd);
    struct hv_config c;
    char err[512] = "";
    hv_config_default(&c);
    assert_int_equal(hv_config_load_file(&c, path, err, sizeof(err)), 0);
    assert_int_equal(c.n_vsphere, 2);
    hv_config_free(&c);

    /* a bad file names the key like a parsed text does */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"engine\":{\"workers\":0}}", f);
    fclose(f);
    hv_config_default(&c);
    assert_int_equal(hv_config_load_file(&c, path, err, sizeof(err)), -1);
    assert_string_equal(err, "engine.workers must be an integer from 1 to 64");
    hv_config_free(&c);
    assert_int_equal(unlink(path), 0);

    hv_config_default(&c);
    assert_int_equal(hv_config_load_file(&c, path, err, sizeof(err)), -1);
    char want[128];
    snprintf(want, sizeof(want), "config %s: cannot open", path);
    assert_string_equal(err, want);
    hv_config_free(&c);
}

/* ---- unknown keys ----------------------------------------------------------------------- */

static void test_unknown_keys_rejected(void **state)
{
    parse_fails("{\"lisen\":\"0.0.0.0:9443\"}", "config: unknown key \"lisen\"");
    parse_fails("{\"defaults\":{\"powercycle\":\"Never\"}}",
                "defaults: unknown key \"powercycle\"");
    parse_fails("{\"engine\":{\"worker\":2}}", "engine: unknown key \"worker\"");
    parse_fails("{\"libvirt\":{\"uri\":[\"qemu:///system\"]}}", "libvirt: unknown key \"uri\"");
    parse_fails("{\"vsphere\":{\"server\":[]}}", "vsphere: unknown key \"server\"");
    parse_fails("{\"vsphere\":{\"servers\":[{\"name\":\"vc\",\"url\":\"https://vc/sdk\","
                "\"usernameFile\":\"/u\",\"passwordFile\":\"/p\",\"insecure\":true}]}}",
                "vsphere.servers[0]: unknown key \"insecure\"");
    parse_fails("{\"vsphere\":{\"servers\":[" SERVER ",{\"name\":\"b\",\"url\":\"https://b/sdk\","
                "\"usernameFile\":\"/u\",\"passwordFile\":\"/p\",\"password\":\"secret\"}]}}",
                "vsphere.servers[1]: unknown key \"password\"");
    parse_fails("{\"profiles\":[{\"kind\":\"KVMMachine\",\"backend\":\"libvirt\",\"fields\":{"
                "\"memory\":{\"path\":\"/"
                "m\",\"unit\":\"MiB\"}},\"identity\":{\"byName\":true},\"group\":\"x\"}]}",
                "profiles[0]: unknown key \"group\"");
    parse_fails(
        "{\"profiles\":[" PROFILE ",{\"kind\":\"B\",\"backend\":\"libvirt\",\"fields\":{"
        "\"memory\":{\"path\":\"/m\",\"unit\":\"MiB\"}},\"identity\":{\"byName\":true},\"x\":1}]}",
        "profiles[1]: unknown key \"x\"");
    parse_fails("{\"profiles\":[{\"kind\":\"KVMMachine\",\"backend\":\"libvirt\",\"fields\":{"
                "\"memory\":{\"path\":\"/m\",\"units\":\"MiB\"}},\"identity\":{\"byName\":true}}]}",
                "profiles[0].fields.memory: unknown key \"units\"");
    parse_fails("{\"profiles\":[{\"kind\":\"KVMMachine\",\"backend\":\"libvirt\",\"fields\":{"
                "\"memory\":{\"path\":\"/m\",\"unit\":\"MiB\"}},\"identity\":{\"byname\":true}}]}",
                "profiles[0].identity: unknown key \"byname\"");
}

/* BUG: an unknown key inside a profile's "fields" object is reported against the profile, not
 * the fields object: {"fields":{"gpus":...}} gives `profiles[0]: unknown key "gpus"`, which
 * reads as a top-level profile key (every other level names its full path, e.g.
 * `profiles[0].fields.memory: ...`, `profiles[0].identity: ...`).
 * Fix (src/hooks/profile.c, load_one): build `char fwhere[128]; snprintf(fwhere, sizeof(fwhere),
 * "%s.fields", where);` and call `only_keys(fields, fkeys, fwhere, err, errlen)`. Kept out of
 * the run list until fixed. */
static void test_unknown_field_key_names_fields_path(void **state)
{
    parse_fails(
        "{\"profiles\":[{\"kind\":\"KVMMachine\",\"backend\":\"libvirt\",\"fields\":{"
        "\"memory\":{\"path\":\"/m\",\"unit\":\"MiB\"},\"gpus\":{\"path\":\"/g\"}},\"identity\":{"
        "\"byName\":true}}]}",
        "profiles[0].fields: unknown key \"gpus\"");
}

/* BUG: config.c accepts keys in "defaults" that schemas/config.json (which config.h names as
 * the shape) does not allow: defaults.liveTimeoutSeconds, shutdownTimeoutSeconds and
 * deadlineSeconds ("defaults" has additionalProperties false with only powerCycle,
 * onUncoverable, powerOffMode; the timeouts belong to "engine", as integers). Here they are
 * accepted as *strings* (through hv_settings_apply), so {"defaults":{"liveTimeoutSeconds":"60"}}
 * loads although the schema rejects it, and the integer spelling the schema uses elsewhere
 * fails with "defaults: setting liveTimeoutSeconds must be a string".
 * Fix (src/config/config.c, parse_defaults): drop the three *Seconds names from `keys[]` so they
 * are rejected as `defaults: unknown key "liveTimeoutSeconds"` (or, if they are meant to be there,
 * add them to schemas/config.json). Kept out of the run list until decided. */
static void test_defaults_only_schema_keys(void **state)
{
    parse_fails("{\"defaults\":{\"liveTimeoutSeconds\":\"60\"}}",
                "defaults: unknown key \"liveTimeoutSeconds\"");
    parse_fails("{\"defaults\":{\"deadlineSeconds\":\"60\"}}",
                "defaults: unknown key \"deadlineSeconds\"");
}

/* ---- bad values ------------------------------------------------------------------------- */

static void test_can_update_failure_policy(void **state)
{
    (void)state;
    struct hv_config c;
    hv_config_default(&c);
    assert_false(c.can_update_ignore); /* default Fail */
    hv_config_free(&c);
    parse_ok(&c, "{\"canUpdateFailurePolicy\":\"Ignore\"}");
    assert_true(c.can_update_ignore);
    hv_config_free(&c);
    parse_ok(&c, "{\"canUpdateFailurePolicy\":\"Fail\"}");
    assert_false(c.can_update_ignore);
    hv_config_free(&c);
    parse_fails("{\"canUpdateFailurePolicy\":\"ignore\"}",
                "config.canUpdateFailurePolicy must be Fail or Ignore");
    parse_fails("{\"canUpdateFailurePolicy\":true}",
                "config.canUpdateFailurePolicy must be Fail or Ignore");
}

static void test_bad_top_level_values(void **state)
{
    parse_fails("{\"handlerTimeoutSeconds\":31}",
                "config.handlerTimeoutSeconds must be an integer from 1 to 30");
    parse_fails("{\"handlerTimeoutSeconds\":0}",
                "config.handlerTimeoutSeconds must be an integer from 1 to 30");
    parse_fails("{\"handlerTimeoutSeconds\":10.0}",
                "config.handlerTimeoutSeconds must be an integer from 1 to 30");
    parse_fails("{\"handlerTimeoutSeconds\":\"10\"}",
                "config.handlerTimeoutSeconds must be an integer from 1 to 30");
    parse_fails("{\"maxBodyBytes\":10}", "config.maxBodyBytes must be an integer from 1024 to "
                                         "67108864");
    parse_fails("{\"maxBodyBytes\":67108865}", "config.maxBodyBytes must be an integer from 1024 "
                                               "to 67108864");
    parse_fails("{\"maxBodyBytes\":9223372036854775808}",
                "config.maxBodyBytes must be an integer from 1024 to 67108864");
    parse_fails("{\"listen\":\"\"}", "config.listen must be a non-empty string");
    parse_fails("{\"listen\":9443}", "config.listen must be a non-empty string");
    parse_fails("[]", "config must be an object");
    parse_fails("{\"defaults\":[]}", "defaults must be an object");
    parse_fails("{\"engine\":null}", "engine must be an object");
    parse_fails("{\"defaults\":{\"powerCycle\":\"Always\"}}",
                "defaults: setting powerCycle has an invalid value (want IfNeeded|Never)");
    parse_fails("{\"defaults\":{\"powerOffMode\":\"trySoft\"}}",
                "defaults: setting powerOffMode has an invalid value (want TrySoft|Soft|Hard)");
    parse_fails("{\"engine\":{\"workers\":65}}", "engine.workers must be an integer from 1 to 64");
    parse_fails("{\"engine\":{\"deadlineSeconds\":604801}}",
                "engine.deadlineSeconds must be an integer from 1 to 604800");
    parse_fails("{\"engine\":{\"stepTimeoutSeconds\":-1}}",
                "engine.stepTimeoutSeconds must be an integer from 1 to 86400");
    parse_fails("{\"libvirt\":{\"uris\":[]}}", "libvirt.uris must be an array of 1 to 1024 URIs");
    parse_fails("{\"libvirt\":{\"uris\":\"qemu:///system\"}}",
                "libvirt.uris must be an array of 1 to 1024 URIs");
    parse_fails("{\"libvirt\":{\"uris\":[\"qemu:///system\",\"kvm1\"]}}",
                "libvirt.uris[1] must be a libvirt URI");
    parse_fails("{\"libvirt\":{\"keepaliveCount\":101}}",
                "libvirt.keepaliveCount must be an integer from 1 to 100");
    parse_fails("{\"libvirt\":{\"connectTimeoutSeconds\":0}}",
                "libvirt.connectTimeoutSeconds must be an integer from 1 to 600");

    /* malformed JSON */
    struct hv_config c;
    char err[256] = "";
    hv_config_default(&c);
    assert_int_equal(hv_config_parse(&c, "{\"listen\":", 10, err, sizeof(err)), -1);
    assert_true(strncmp(err, "config: invalid JSON", 20) == 0);
    hv_config_free(&c);
}

/* identityFrom capv needs no credential files; the kubernetes section and its defaults. */
static void test_kubernetes_and_capv_identity(void **state)
{
    (void)state;
    struct hv_config c;
    parse_ok(&c, "{\"vsphere\":{\"servers\":[{\"name\":\"vc\",\"url\":\"https://vc/sdk\","
                 "\"identityFrom\":\"capv\"}]},\"kubernetes\":{\"server\":\"https://k:6443\","
                 "\"tokenFile\":\"/t\",\"caFile\":\"/ca\",\"capvNamespace\":\"capv\","
                 "\"timeoutSeconds\":3,\"events\":true,\"holdRemediation\":true}}");
    assert_true(c.vsphere[0].identity_capv);
    assert_null(c.vsphere[0].password_file);
    assert_string_equal(c.kube.server, "https://k:6443");
    assert_string_equal(c.kube.token_file, "/t");
    assert_string_equal(c.kube.ca_file, "/ca");
    assert_string_equal(c.kube.capv_namespace, "capv");
    assert_int_equal(c.kube.timeout_s, 3);
    assert_true(c.kube.events);
    assert_true(c.kube.mhc_hold);
    hv_config_free(&c);
    parse_ok(&c, "{}");
    assert_null(c.kube.server);
    assert_int_equal(c.kube.timeout_s, 5);
    assert_false(c.kube.events);
    assert_false(c.kube.mhc_hold);
    hv_config_free(&c);
}

static void test_bad_vsphere_servers(void **state)
{
    parse_fails("{\"vsphere\":{\"servers\":[{\"name\":\"vc\",\"url\":\"http://vc.example.com/sdk\","
                "\"usernameFile\":\"/u\",\"passwordFile\":\"/p\"}]}}",
                "vsphere.servers[0].url must start with https://");
    parse_fails("{\"vsphere\":{\"servers\":[" SERVER ",{\"name\":\"b\",\"url\":\"ftp://b/sdk\","
                "\"usernameFile\":\"/u\",\"passwordFile\":\"/p\"}]}}",
                "vsphere.servers[1].url must start with https://");
    parse_fails("{\"vsphere\":{\"servers\":[{\"name\":\"vc\",\"url\":\"https://vc/"
                "sdk\",\"usernameFile\":\"/u\"}]}}",
                "vsphere.servers[0].passwordFile must be a non-empty string");
    parse_fails(
        "{\"vsphere\":{\"servers\":[{\"url\":\"https://vc/sdk\",\"passwordFile\":\"/p\"}]}}",
        "vsphere.servers[0].name must be a non-empty string");
    parse_fails(
        "{\"vsphere\":{\"servers\":[{\"name\":\"vc\",\"url\":\"https://vc/sdk\","
        "\"usernameFile\":\"/u\",\"passwordFile\":\"/p\",\"insecureSkipVerify\":\"true\"}]}}",
        "vsphere.servers[0].insecureSkipVerify must be a boolean");
    parse_fails("{\"vsphere\":{\"servers\":[{\"name\":\"vc\",\"url\":\"https://vc/sdk\","
                "\"usernameFile\":\"/u\",\"passwordFile\":\"/p\",\"caFile\":\"\"}]}}",
                "vsphere.servers[0].caFile must be a non-empty string");
    parse_fails("{\"vsphere\":{\"servers\":[{\"name\":\"vc\",\"url\":\"https://vc/sdk\","
                "\"identityFrom\":\"capi\"}]}}",
                "vsphere.servers[0].identityFrom must be \"capv\"");
    parse_fails("{\"vsphere\":{\"servers\":[{\"name\":\"vc\",\"url\":\"https://vc/sdk\","
                "\"identityFrom\":\"capv\",\"passwordFile\":\"/p\"}]}}",
                "vsphere.servers[0]: usernameFile and passwordFile go together");
    parse_fails("{\"kubernetes\":{\"server\":\"http://k:6443\"}}",
                "kubernetes.server must be https://HOST[:PORT] without spaces");
    parse_fails("{\"kubernetes\":{\"events\":\"yes\"}}", "kubernetes.events must be a boolean");
    parse_fails("{\"kubernetes\":{\"holdRemediation\":1}}",
                "kubernetes.holdRemediation must be a boolean");
    parse_fails("{\"kubernetes\":{\"timeoutSeconds\":0}}",
                "kubernetes.timeoutSeconds must be an integer from 1 to 30");
    parse_fails("{\"kubernetes\":{\"token\":\"abc\"}}", "kubernetes: unknown key \"token\"");
    parse_fails("{\"vsphere\":{\"servers\":{}}}",
                "vsphere.servers must be an array of at most 256");
    parse_fails("{\"vsphere\":{\"servers\":[1]}}", "vsphere.servers[0] must be an object");
    /* a string with an embedded NUL is not a file name */
    parse_fails("{\"vsphere\":{\"servers\":[{\"name\":\"vc\",\"url\":\"https://vc/sdk\","
                "\"usernameFile\":\"/u\",\"passwordFile\":\"/p\\u0000x\"}]}}",
                "vsphere.servers[0].passwordFile must be a non-empty string");
}

static void test_bad_profiles(void **state)
{
    parse_fails("{\"profiles\":{}}", "profiles: must be an array");
    parse_fails("{\"profiles\":[1]}", "profiles[0]: must be an object");
    /* bad JSON pointers */
    parse_fails("{\"profiles\":[{\"kind\":\"K\",\"backend\":\"libvirt\",\"fields\":{\"memory\":{"
                "\"path\":\"memoryMiB\",\"unit\":\"MiB\"}},\"identity\":{\"byName\":true}}]}",
                "profiles[0].fields.memory: \"path\" must be a JSON pointer of at most 127 bytes");
    parse_fails("{\"profiles\":[{\"kind\":\"K\",\"backend\":\"libvirt\",\"fields\":{\"cpus\":{"
                "\"path\":\"/a~2b\"}},\"identity\":{\"byName\":true}}]}",
                "profiles[0].fields.cpus: \"path\" must be a JSON pointer of at most 127 bytes");
    parse_fails("{\"profiles\":[{\"kind\":\"K\",\"backend\":\"libvirt\",\"fields\":{\"memory\":{"
                "\"path\":\"\",\"unit\":\"MiB\"}},\"identity\":{\"byName\":true}}]}",
                "profiles[0].fields.memory: \"path\" must be a JSON pointer of at most 127 bytes");
    parse_fails("{\"profiles\":[{\"kind\":\"K\",\"backend\":\"libvirt\",\"fields\":{\"memory\":{"
                "\"unit\":\"MiB\"}},\"identity\":{\"byName\":true}}]}",
                "profiles[0].fields.memory: \"path\" is required");
    parse_fails("{\"profiles\":[{\"kind\":\"K\",\"backend\":\"libvirt\",\"fields\":{\"memory\":{"
                "\"path\":\"/"
                "m\",\"unit\":\"MiB\"}},\"identity\":{\"byName\":true,\"serverPath\":\"uri\"}}]}",
                "profiles[0].identity: \"serverPath\" must be a JSON pointer of at most 127 bytes");
    /* unknown or missing backend, missing kind */
    parse_fails("{\"profiles\":[{\"kind\":\"K\",\"backend\":\"xen\",\"fields\":{\"memory\":{"
                "\"path\":\"/m\",\"unit\":\"MiB\"}},\"identity\":{\"byName\":true}}]}",
                "profiles[0]: backend must be libvirt, vsphere or kubevirt");
    parse_fails("{\"profiles\":[" PROFILE ",{\"kind\":\"K\",\"backend\":\"VSphere\",\"fields\":{"
                "\"memory\":{\"path\":\"/m\",\"unit\":\"MiB\"}},\"identity\":{\"byName\":true}}]}",
                "profiles[1]: backend must be libvirt, vsphere or kubevirt");
    parse_fails(
        "{\"profiles\":[{\"kind\":\"K\",\"fields\":{\"memory\":{\"path\":\"/m\",\"unit\":\"MiB\"}},"
        "\"identity\":{\"byName\":true}}]}",
        "profiles[0]: \"kind\" and \"backend\" are required");
    parse_fails("{\"profiles\":[{\"backend\":\"libvirt\",\"fields\":{\"memory\":{\"path\":\"/"
                "m\",\"unit\":\"MiB\"}},"
                "\"identity\":{\"byName\":true}}]}",
                "profiles[0]: \"kind\" and \"backend\" are required");
    /* fields */
    parse_fails("{\"profiles\":[{\"kind\":\"K\",\"backend\":\"libvirt\",\"fields\":{},"
                "\"identity\":{\"byName\":true}}]}",
                "profiles[0]: \"fields\" must be an object with at least one field");
    parse_fails("{\"profiles\":[{\"kind\":\"K\",\"backend\":\"libvirt\","
                "\"identity\":{\"byName\":true}}]}",
                "profiles[0]: \"fields\" must be an object with at least one field");
    parse_fails("{\"profiles\":[{\"kind\":\"K\",\"backend\":\"libvirt\",\"fields\":{\"cpus\":{"
                "\"path\":\"/c\",\"unit\":\"MiB\"}},\"identity\":{\"byName\":true}}]}",
                "profiles[0].fields.cpus: \"unit\" applies to memory and disk only, as a string");
    parse_fails("{\"profiles\":[{\"kind\":\"K\",\"backend\":\"libvirt\",\"fields\":{\"memory\":{"
                "\"path\":\"/m\",\"unit\":\"TiB\"}},\"identity\":{\"byName\":true}}]}",
                "profiles[0].fields.memory: unit must be KiB, MiB, GiB, bytes or quantity");
    parse_fails("{\"profiles\":[{\"kind\":\"K\",\"backend\":\"libvirt\",\"fields\":{\"memory\":"
                "\"/m\"},\"identity\":{\"byName\":true}}]}",
                "profiles[0].fields.memory: must be an object");
    /* identity, template, versions */
    parse_fails("{\"profiles\":[{\"kind\":\"K\",\"backend\":\"libvirt\",\"fields\":{\"memory\":{"
                "\"path\":\"/m\",\"unit\":\"MiB\"}}}]}",
                "profiles[0]: \"identity\" is required");
    parse_fails("{\"profiles\":[{\"kind\":\"K\",\"backend\":\"libvirt\",\"fields\":{\"memory\":{"
                "\"path\":\"/m\",\"unit\":\"MiB\"}},\"identity\":{\"byName\":false}}]}",
                "profiles[0]: identity needs providerIDPrefix or byName");
    parse_fails("{\"profiles\":[{\"kind\":\"K\",\"backend\":\"libvirt\",\"fields\":{\"memory\":{"
                "\"path\":\"/m\",\"unit\":\"MiB\"}},\"identity\":{\"byName\":\"yes\"}}]}",
                "profiles[0].identity: \"byName\" must be a boolean");
    parse_fails("{\"profiles\":[{\"kind\":\"K\",\"backend\":\"libvirt\",\"template\":\"yes\","
                "\"fields\":{\"memory\":{\"path\":\"/"
                "m\",\"unit\":\"MiB\"}},\"identity\":{\"byName\":true}}]}",
                "profiles[0]: \"template\" must be a boolean");
    parse_fails(
        "{\"profiles\":[{\"kind\":\"K\",\"backend\":\"libvirt\",\"apiVersions\":[\"a\",\"b\","
        "\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\"],\"fields\":{\"memory\":{\"path\":\"/"
        "m\",\"unit\":\"MiB\"}},"
        "\"identity\":{\"byName\":true}}]}",
        "profiles[0]: \"apiVersions\" must be an array of 1 to 8 versions (leave it out for any "
        "version)");
    parse_fails(
        "{\"profiles\":[{\"kind\":\"K\",\"backend\":\"libvirt\",\"apiVersions\":[\"v1\",\"\"],"
        "\"fields\":{\"memory\":{\"path\":\"/"
        "m\",\"unit\":\"MiB\"}},\"identity\":{\"byName\":true}}]}",
        "profiles[0]: apiVersions[1] must be an API version such as v1beta1 (at most 31 "
        "characters)");
    parse_fails("{\"profiles\":[{\"kind\":7,\"backend\":\"libvirt\",\"fields\":{\"memory\":{"
                "\"path\":\"/m\",\"unit\":\"MiB\"}},\"identity\":{\"byName\":true}}]}",
                "profiles[0]: \"kind\" must be a string of at most 63 bytes");
}

/* ---- profiles override and add ---------------------------------------------------------- */

/* Disk fields: GiB by default, a libvirt target device or a vSphere unit number. */
static void test_disk_profiles(void **state)
{
    (void)state;
    struct hv_config c;
    hv_config_default(&c);
    const struct hv_profile *vs = hv_profile_find(&c.profiles, GROUP "/v1beta1", "VSphereMachine");
    const struct hv_profile *lv = hv_profile_find(&c.profiles, GROUP "/v1", "LibvirtMachine");
    assert_non_null(vs);
    assert_non_null(lv);
    char sel[32];
    assert_string_equal(vs->field[HV_F_DISK].path, "/diskGiB");
    assert_int_equal(vs->field[HV_F_DISK].unit, HV_UNIT_GIB);
    hv_profile_disk_ref(vs, sel, sizeof(sel));
    assert_string_equal(sel, ""); /* the first virtual disk */
    assert_string_equal(lv->field[HV_F_DISK].path, "/diskGiB");
    hv_profile_disk_ref(lv, sel, sizeof(sel));
    assert_string_equal(sel, "vda");
    hv_config_free(&c);

    parse_ok(&c, "{\"profiles\":["
                 "{\"kind\":\"K1\",\"backend\":\"vsphere\",\"fields\":{\"disk\":{"
                 "\"path\":\"/disk/sizeMiB\",\"unit\":\"MiB\",\"unitNumber\":1}},"
                 "\"identity\":{\"providerIDPrefix\":\"vsphere://\"}},"
                 "{\"kind\":\"K2\",\"backend\":\"libvirt\",\"fields\":{\"disk\":{"
                 "\"path\":\"/rootGiB\",\"target\":\"sdb\"}},\"identity\":{\"byName\":true}}]}");
    const struct hv_profile *k1 = hv_profile_find(&c.profiles, GROUP "/v1", "K1");
    const struct hv_profile *k2 = hv_profile_find(&c.profiles, GROUP "/v1", "K2");
    assert_int_equal(k1->field[HV_F_DISK].unit, HV_UNIT_MIB);
    hv_profile_disk_ref(k1, sel, sizeof(sel));
    assert_string_equal(sel, "1");
    assert_int_equal(k2->field[HV_F_DISK].unit, HV_UNIT_GIB); /* the default for disks */
    hv_profile_disk_ref(k2, sel, sizeof(sel));
    assert_string_equal(sel, "sdb");
    hv_config_free(&c);

    parse_fails("{\"profiles\":[{\"kind\":\"K\",\"backend\":\"libvirt\",\"fields\":{\"disk\":{"
                "\"path\":\"/d\"}},\"identity\":{\"byName\":true}}]}",
                "profiles[0].fields.disk: \"target\" is required (the disk's target device, "
                "e.g. vda)");
    parse_fails("{\"profiles\":[{\"kind\":\"K\",\"backend\":\"libvirt\",\"fields\":{\"disk\":{"
                "\"path\":\"/d\",\"target\":\"vda\",\"unitNumber\":0}},\"identity\":{"
                "\"byName\":true}}]}",
                "profiles[0].fields.disk: \"unitNumber\" applies to the vsphere backend only");
    parse_fails("{\"profiles\":[{\"kind\":\"K\",\"backend\":\"vsphere\",\"fields\":{\"disk\":{"
                "\"path\":\"/d\",\"target\":\"vda\"}},\"identity\":{\"byName\":true}}]}",
                "profiles[0].fields.disk: \"target\" applies to the libvirt backend only");
    parse_fails("{\"profiles\":[{\"kind\":\"K\",\"backend\":\"vsphere\",\"fields\":{\"disk\":{"
                "\"path\":\"/d\",\"unitNumber\":-1}},\"identity\":{\"byName\":true}}]}",
                "profiles[0].fields.disk: \"unitNumber\" must be an integer from 0 to 63");
    parse_fails("{\"profiles\":[{\"kind\":\"K\",\"backend\":\"libvirt\",\"fields\":{\"disk\":{"
                "\"path\":\"/d\",\"target\":\"../x\"}},\"identity\":{\"byName\":true}}]}",
                "profiles[0].fields.disk: \"target\" must be a device name such as vda");
    parse_fails("{\"profiles\":[{\"kind\":\"K\",\"backend\":\"libvirt\",\"fields\":{\"cpus\":{"
                "\"path\":\"/c\",\"target\":\"vda\"}},\"identity\":{\"byName\":true}}]}",
                "profiles[0].fields.cpus: unknown key \"target\"");
}

static void test_profiles_override_and_add(void **state)
{
    struct hv_config c;
    parse_ok(&c,
             "{\"profiles\":["
             /* override a built-in kind (same kind + group) */
             "{\"kind\":\"VSphereMachine\",\"backend\":\"vsphere\",\"apiVersions\":[\"v1beta2\"],"
             "\"fields\":{\"memory\":{\"path\":\"/hardware/memoryMB\",\"unit\":\"MiB\"}},"
             "\"identity\":{\"providerIDPrefix\":\"vsphere://\",\"serverPath\":\"/vc\"}},"
             /* a new kind in the default group */
             "{\"kind\":\"ProxmoxMachine\",\"backend\":\"libvirt\",\"fields\":{\"memory\":{"
             "\"path\":\"/memory\",\"unit\":\"bytes\"},\"cpus\":{\"path\":\"/cores\"}},"
             "\"identity\":{\"byName\":true}},"
             /* the same kind name in another group is another profile */
             "{\"kind\":\"VSphereMachine\",\"apiGroup\":\"infra.example.com\",\"backend\":"
             "\"vsphere\",\"fields\":{\"cpus\":{\"path\":\"/cpu/count\"}},"
             "\"identity\":{\"providerIDPrefix\":\"vsphere://\"}}]}");
    assert_int_equal(c.profiles.n, 8);

    const struct hv_profile *vs = hv_profile_find(&c.profiles, GROUP "/v1beta2", "VSphereMachine");
    assert_non_null(vs);
    assert_string_equal(vs->field[HV_F_MEMORY].path, "/hardware/memoryMB");
    assert_string_equal(hv_field_name(vs, HV_F_MEMORY), "memoryMB");
    assert_false(vs->field[HV_F_CPUS].set); /* an override replaces the whole profile */
    assert_false(vs->field[HV_F_CORES].set);
    assert_string_equal(vs->server_path, "/vc");
    assert_null(hv_profile_find(&c.profiles, GROUP "/v1beta1", "VSphereMachine"));
    /* the template built-in is a different kind and stays */
    assert_non_null(hv_profile_find(&c.profiles, GROUP "/v1beta1", "VSphereMachineTemplate"));

    const struct hv_profile *px = hv_profile_find(&c.profiles, GROUP "/v1alpha1", "ProxmoxMachine");
    assert_non_null(px);
    assert_string_equal(px->api_group, GROUP);
    assert_int_equal(px->n_versions, 0);
    assert_false(px->is_template);
    assert_int_equal(px->field[HV_F_MEMORY].unit, HV_UNIT_BYTES);
    assert_string_equal(px->field[HV_F_CPUS].path, "/cores");
    assert_true(px->by_name);
    assert_string_equal(px->providerid_prefix, "");

    const struct hv_profile *other =
        hv_profile_find(&c.profiles, "infra.example.com/v9", "VSphereMachine");
    assert_non_null(other);
    assert_true(other != vs);
    assert_string_equal(other->field[HV_F_CPUS].path, "/cpu/count");
    assert_false(other->field[HV_F_MEMORY].set);
    hv_config_free(&c);

    /* the last of two entries for the same kind wins */
    parse_ok(&c, "{\"profiles\":[" PROFILE ",{\"kind\":\"KVMMachine\",\"backend\":\"libvirt\","
                 "\"fields\":{\"memory\":{\"path\":\"/"
                 "second\",\"unit\":\"MiB\"}},\"identity\":{\"byName\":true}}]}");
    assert_int_equal(c.profiles.n, 7);
    const struct hv_profile *k = hv_profile_find(&c.profiles, GROUP "/v1", "KVMMachine");
    assert_non_null(k);
    assert_string_equal(k->field[HV_F_MEMORY].path, "/second");
    hv_config_free(&c);
}

static void test_profiles_load_direct(void **state)
{
    struct hv_profiles ps;
    char err[256] = "";
    hv_profiles_builtin(&ps);
    assert_int_equal(ps.n, 6);
    assert_int_equal(hv_profiles_load(&ps, NULL, err, sizeof(err)), -1);
    assert_string_equal(err, "profiles: must be an array");
    hj *arr = tu_json("[" PROFILE "]");
    assert_int_equal(hv_profiles_load(&ps, arr, err, sizeof(err)), 0);
    assert_int_equal(ps.n, 7);
    hj_free(arr);
    /* a failing entry after a good one: the good one is loaded, the error names the bad one */
    arr = tu_json("[{\"kind\":\"A\",\"backend\":\"vsphere\",\"fields\":{\"memory\":{\"path\":\"/"
                  "m\",\"unit\":\"MiB\"}},"
                  "\"identity\":{\"byName\":true}},{\"kind\":\"B\"}]");
    assert_int_equal(hv_profiles_load(&ps, arr, err, sizeof(err)), -1);
    assert_string_equal(err, "profiles[1]: \"kind\" and \"backend\" are required");
    hj_free(arr);
    hv_profiles_free(&ps);
    assert_int_equal(ps.n, 0);
    assert_null(ps.v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_config),
        cmocka_unit_test(test_empty_config_keeps_defaults),
        cmocka_unit_test(test_full_config),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_unknown_keys_rejected),
        cmocka_unit_test(test_unknown_field_key_names_fields_path),
        cmocka_unit_test(test_defaults_only_schema_keys),
        cmocka_unit_test(test_bad_top_level_values),
        cmocka_unit_test(test_can_update_failure_policy),
        cmocka_unit_test(test_bad_vsphere_servers),
        cmocka_unit_test(test_kubernetes_and_capv_identity),
        cmocka_unit_test(test_bad_profiles),
        cmocka_unit_test(test_disk_profiles),
        cmocka_unit_test(test_profiles_override_and_add),
        cmocka_unit_test(test_profiles_load_direct),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_libvirt_xml.c: pure unit tests of the libvirt backend's helpers on XML strings: unit
 * and cpuset parsing, domain XML facts (memory the guest has, slots, agent), the memory and
 * field planning rules, RECONFIGURE's rewrite, record escaping and error mapping. No libvirt
 * connection is opened here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lv_testutil.h"

/* live XML of a running "dimm" lab domain (trimmed): 1 GiB in one cell, one 512 MiB DIMM */
static const char *const DIMM_LIVE =
    "<domain type='qemu' id='7'><name>hvt-x</name>"
    "<uuid>71685b29-9606-4fec-8013-545635eb64f1</uuid>"
    "<maxMemory slots='8' unit='KiB'>8388608</maxMemory>"
    "<memory unit='KiB'>1572864</memory><currentMemory unit='KiB'>1572864</currentMemory>"
    "<vcpu placement='static' current='1'>4</vcpu>"
    "<features><acpi/><apic/></features>"
    "<cpu mode='custom'><topology sockets='4' dies='1' cores='1' threads='1'/>"
    "<numa><cell id='0' cpus='0-3' memory='1048576' unit='KiB'/></numa></cpu>"
    "<devices><memballoon model='virtio'/>"
    "<memory model='dimm'><target><size unit='KiB'>524288</size><node>0</node></target>"
    "<alias name='dimm0'/><address type='dimm' slot='0' base='0x100000000'/></memory>"
    "<channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0' "
    "state='connected'/></channel>"
    "</devices></domain>";

/* live XML of a "vmem" lab domain: 1 GiB initial, virtio-mem 1 GiB with 256 MiB requested */
static const char *const VMEM_LIVE =
    "<domain type='qemu' id='8'><name>hvt-v</name>"
    "<maxMemory slots='8' unit='KiB'>8388608</maxMemory>"
    "<memory unit='KiB'>2097152</memory><currentMemory unit='KiB'>1048576</currentMemory>"
    "<vcpu placement='static' current='1'>2</vcpu><features><acpi/></features>"
    "<cpu><numa><cell id='0' cpus='0-1' memory='1048576' unit='KiB'/></numa></cpu>"
    "<devices><memballoon model='virtio'/>"
    "<memory model='virtio-mem'><target><size unit='KiB'>1048576</size><node>0</node>"
    "<block unit='KiB'>2048</block><requested unit='KiB'>262144</requested>"
    "<current unit='KiB'>0</current></target><alias name='virtiomem0'/>"
    "<address type='pci' domain='0x0000' bus='0x03' slot='0x00' function='0x0'/></memory>"
    "<channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0'/></channel>"
    "</devices></domain>";

/* the plain lab domain: no slots, vCPU max == current, no NUMA */
static const char *const PLAIN =
    "<domain type='qemu'><name>hvt-p</name><memory unit='MiB'>1024</memory>"
    "<vcpu>2</vcpu><devices><memballoon model='none'/></devices></domain>";

static void test_units(void **state)
{
    (void)state;
    assert_int_equal(lv_xml_to_kib("1024", NULL), 1024);
    assert_int_equal(lv_xml_to_kib("1024", "KiB"), 1024);
    assert_int_equal(lv_xml_to_kib("512", "MiB"), 512 * 1024);
    assert_int_equal(lv_xml_to_kib("2", "G"), 2 * 1024 * 1024);
    assert_int_equal(lv_xml_to_kib("1", "GiB"), 1024 * 1024);
    assert_int_equal(lv_xml_to_kib("2048", "bytes"), 2);
    assert_int_equal(lv_xml_to_kib("1000", "KB"), 977); /* rounded up to whole KiB */
    assert_int_equal(lv_xml_to_kib("12x", "KiB"), -1);
    assert_int_equal(lv_xml_to_kib("-1", "KiB"), -1);
    assert_int_equal(lv_xml_to_kib("1", "parsec"), -1);
    assert_int_equal(lv_xml_to_kib("99999999999999999999", "KiB"), -1);
}

static void test_cpuset(void **state)
{
    (void)state;
    bool set[16];
    assert_int_equal(lv_xml_parse_cpuset("0-3,^2,7", set, 16), 0);
    assert_true(set[0] && set[1] && !set[2] && set[3] && !set[4] && set[7]);
    assert_int_equal(lv_xml_parse_cpuset("3-1", set, 16), -1);
    assert_int_equal(lv_xml_parse_cpuset("20", set, 16), -1);
    assert_int_equal(lv_xml_parse_cpuset("a", set, 16), -1);
}

static void test_parse_dimm(void **state)
{
    (void)state;
    struct lv_dominfo li;
    char why[128];
    assert_int_equal(lv_xml_parse_domain(DIMM_LIVE, &li, why, sizeof(why)), 0);
    assert_int_equal(li.memory_kib, 1572864);
    assert_int_equal(li.max_kib, 8388608);
    assert_int_equal(li.slots, 8);
    assert_int_equal(li.slots_used, 1);
    assert_int_equal(li.ncells, 1);
    assert_int_equal(li.initial_kib, 1048576);
    assert_int_equal(li.effective_kib, 1572864); /* cells + DIMM */
    assert_int_equal(li.vcpu_max, 4);
    assert_int_equal(li.vcpu_current, 1);
    assert_int_equal(li.cores, 1);
    assert_int_equal(li.sockets, 4);
    assert_true(li.acpi);
    assert_true(li.balloon);
    assert_true(li.agent_channel);
    assert_true(li.agent_connected);
}

static void test_parse_vmem_counts_current_not_requested(void **state)
{
    (void)state;
    struct lv_dominfo li;
    char why[128];
    assert_int_equal(lv_xml_parse_domain(VMEM_LIVE, &li, why, sizeof(why)), 0);
    assert_int_equal(li.nmems, 1);
    assert_int_equal(li.mems[0].model, LV_MEM_VIRTIO_MEM);
    assert_int_equal(li.mems[0].requested_kib, 262144);
    assert_int_equal(li.mems[0].current_kib, 0);
    assert_int_equal(li.mems[0].block_kib, 2048);
    assert_int_equal(li.slots_used, 0); /* virtio-mem sits on PCI */
    assert_int_equal(li.effective_kib, 1048576);
    assert_true(li.agent_channel);
    assert_false(li.agent_connected);

    /* persistent XML has no <current>: a boot guarantees none of what it requests */
    char *cfg = strdup(VMEM_LIVE);
    char *cur = strstr(cfg, "<current unit='KiB'>0</current>");
    assert_non_null(cur);
    memmove(cur, cur + strlen("<current unit='KiB'>0</current>"),
            strlen(cur + strlen("<current unit='KiB'>0</current>")) + 1);
    assert_int_equal(lv_xml_parse_domain(cfg, &li, why, sizeof(why)), 0);
    assert_int_equal(li.effective_kib, 1048576);
    assert_int_equal(li.mems[0].requested_kib, 262144);
    free(cfg);
}

static void test_parse_plain_and_balloon(void **state)
{
    (void)state;
    struct lv_dominfo li;
    char why[128];
    assert_int_equal(lv_xml_parse_domain(PLAIN, &li, why, sizeof(why)), 0);
    assert_int_equal(li.effective_kib, 1024 * 1024);
    assert_int_equal(li.max_kib, -1);
    assert_int_equal(li.cores, -1);
    assert_false(li.balloon);
    assert_int_equal(li.vcpu_current, 2);
    /* a deflated balloon: the guest has <currentMemory> */
    const char *b = "<domain><memory unit='KiB'>8388608</memory>"
                    "<currentMemory unit='KiB'>2097152</currentMemory><vcpu>2</vcpu>"
                    "<devices><memballoon model='virtio'/></devices></domain>";
    assert_int_equal(lv_xml_parse_domain(b, &li, why, sizeof(why)), 0);
    assert_int_equal(li.effective_kib, 2097152);
    assert_int_equal(li.plugged_kib, 8388608);
}

static void test_parse_rejects(void **state)
{
    (void)state;
    struct lv_dominfo li;
    char why[128];
    assert_int_equal(lv_xml_parse_domain("<domain>", &li, why, sizeof(why)), -1);
    assert_int_equal(lv_xml_parse_domain("<network/>", &li, why, sizeof(why)), -1);
    assert_int_equal(lv_xml_parse_domain("<domain><vcpu>1</vcpu></domain>", &li, why, sizeof(why)),
                     -1);
    /* an external entity is never fetched nor expanded */
    const char *xxe = "<?xml version='1.0'?><!DOCTYPE d [<!ENTITY x SYSTEM "
                      "'file:///etc/hostname'>]><domain><memory>&x;</memory></domain>";
    assert_int_equal(lv_xml_parse_domain(xxe, &li, why, sizeof(why)), -1);
}

static void test_plan_memory_methods(void **state)
{
    (void)state;
    struct lv_dominfo li;
    struct lv_mem_choice c;
    char why[128];

    assert_int_equal(lv_xml_parse_domain(DIMM_LIVE, &li, why, sizeof(why)), 0);
    lv_plan_memory(&li, li.effective_kib + 512 * 1024, &c);
    assert_int_equal(c.method, LV_MM_DIMM);
    assert_int_equal(c.dimm_kib, 512 * 1024);
    assert_int_equal(c.node, 0);
    /* 100 MiB is not a 128 MiB multiple; the balloon cannot go above what is plugged */
    lv_plan_memory(&li, li.effective_kib + 100 * 1024, &c);
    assert_int_equal(c.method, LV_MM_NONE);
    assert_string_equal(c.reason, "memory delta not a multiple of 128 MiB");
    lv_plan_memory(&li, 8388608 + 1024 * 1024, &c);
    assert_string_equal(c.reason, "above maxMemory");

    /* virtio-mem first: requested = current + delta, block-aligned, within size */
    assert_int_equal(lv_xml_parse_domain(VMEM_LIVE, &li, why, sizeof(why)), 0);
    lv_plan_memory(&li, li.effective_kib + 512 * 1024, &c);
    assert_int_equal(c.method, LV_MM_VIRTIO_MEM);
    assert_int_equal(c.dev, 0);
    assert_int_equal(c.requested_kib, 512 * 1024);
    /* too big for the device: a DIMM of the delta instead */
    lv_plan_memory(&li, li.effective_kib + 2048 * 1024, &c);
    assert_int_equal(c.method, LV_MM_DIMM);
    /* 1 MiB: neither block nor DIMM aligned */
    lv_plan_memory(&li, li.effective_kib + 1024, &c);
    assert_int_equal(c.method, LV_MM_NONE);
    assert_string_equal(c.reason, "memory delta not a multiple of the virtio-mem block size; "
                                  "memory delta not a multiple of 128 MiB");

    /* balloon up to <memory> when nothing else can */
    const char *b = "<domain><memory unit='KiB'>8388608</memory>"
                    "<currentMemory unit='KiB'>2097152</currentMemory><vcpu>2</vcpu>"
                    "<devices><memballoon model='virtio'/></devices></domain>";
    assert_int_equal(lv_xml_parse_domain(b, &li, why, sizeof(why)), 0);
    lv_plan_memory(&li, 4096 * 1024, &c);
    assert_int_equal(c.method, LV_MM_BALLOON);
    assert_int_equal(c.balloon_kib, 4096 * 1024);
    lv_plan_memory(&li, 9000 * 1024, &c);
    assert_int_equal(c.method, LV_MM_NONE);
    assert_string_equal(c.reason, "no memory hot-plug slots (no maxMemory)");
}

static void test_plan_memory_slots_numa_acpi(void **state)
{
    (void)state;
    struct lv_dominfo li;
    struct lv_mem_choice c;
    char why[128];
    assert_int_equal(lv_xml_parse_domain(DIMM_LIVE, &li, why, sizeof(why)), 0);
    li.slots = 1; /* the one slot holds the DIMM already */
    lv_plan_memory(&li, li.effective_kib + 512 * 1024, &c);
    assert_string_equal(c.reason, "no free memory slots");
    li.slots = 8;
    li.acpi = false;
    lv_plan_memory(&li, li.effective_kib + 512 * 1024, &c);
    assert_string_equal(c.reason, "ACPI disabled: no memory hot-add");
    li.acpi = true;
    li.ncells = 0;
    lv_plan_memory(&li, li.effective_kib + 512 * 1024, &c);
    assert_string_equal(c.reason, "no NUMA node for memory hot-add");
    /* two cells: the DIMM goes to the one with less memory */
    li.ncells = 2;
    li.cells[1].id = 1;
    li.cells[1].mem_kib = 1048576;
    lv_plan_memory(&li, li.effective_kib + 512 * 1024, &c);
    assert_int_equal(c.method, LV_MM_DIMM);
    assert_int_equal(c.node, 1); /* node 0 holds 1 GiB + the 512 MiB DIMM */
}

static void test_plan_compute(void **state)
{
    (void)state;
    struct lv_dominfo li;
    struct hv_field_plan p[HV_F_COUNT];
    char why[128];
    assert_int_equal(lv_xml_parse_domain(DIMM_LIVE, &li, why, sizeof(why)), 0);

    struct hv_hw same = {1536, 1, 1, -1};
    lv_plan_compute(&li, true, true, &same, p);
    for (int f = 0; f < HV_F_COUNT; f++)
        assert_int_equal(p[f].how, HV_HOW_NONE);

    struct hv_hw grow = {2048, 3, -1, -1};
    lv_plan_compute(&li, true, true, &grow, p);
    assert_int_equal(p[HV_F_MEMORY].how, HV_HOW_LIVE);
    assert_string_equal(p[HV_F_MEMORY].method, "dimm");
    assert_int_equal(p[HV_F_CPUS].how, HV_HOW_LIVE);
    assert_string_equal(p[HV_F_CPUS].method, "vcpu hot-plug");
    assert_int_equal(p[HV_F_CORES].how, HV_HOW_NONE);

    struct hv_hw over = {1024, 5, 2, -1};
    lv_plan_compute(&li, true, true, &over, p);
    assert_int_equal(p[HV_F_MEMORY].how, HV_HOW_COLD);
    assert_string_equal(p[HV_F_MEMORY].reason, "memory shrink needs a restart");
    assert_int_equal(p[HV_F_CPUS].how, HV_HOW_COLD);
    assert_string_equal(p[HV_F_CPUS].reason, "above maximum vCPUs");
    assert_int_equal(p[HV_F_CORES].how, HV_HOW_COLD);
    assert_string_equal(p[HV_F_CORES].reason, "cores per socket change needs a restart");

    struct hv_hw down = {-1, 0, 0, -1};
    lv_plan_compute(&li, true, true, &down, p);
    assert_int_equal(p[HV_F_MEMORY].how, HV_HOW_NONE);
    assert_int_equal(p[HV_F_CPUS].how, HV_HOW_IMPOSSIBLE);
    assert_int_equal(p[HV_F_CORES].how, HV_HOW_IMPOSSIBLE);

    /* off: every differing field is cold, even what would be live when running */
    lv_plan_compute(&li, false, true, &grow, p);
    assert_int_equal(p[HV_F_MEMORY].how, HV_HOW_COLD);
    assert_string_equal(p[HV_F_MEMORY].reason, "domain is off");
    assert_int_equal(p[HV_F_CPUS].how, HV_HOW_COLD);

    assert_int_equal(lv_xml_parse_domain(PLAIN, &li, why, sizeof(why)), 0);
    struct hv_hw more = {2048, 4, -1, -1};
    lv_plan_compute(&li, true, true, &more, p);
    assert_int_equal(p[HV_F_MEMORY].how, HV_HOW_COLD);
    assert_string_equal(p[HV_F_MEMORY].reason, "no memory hot-plug slots (no maxMemory)");
    assert_string_equal(p[HV_F_CPUS].reason, "above maximum vCPUs");
}

static void test_cold_rewrite_folds(void **state)
{
    (void)state;
    char *out = NULL, why[256];
    struct hv_hw want = {768, 2, -1, -1};
    assert_int_equal(lv_cold_rewrite_xml(DIMM_LIVE, &want, &out, why, sizeof(why)), 0);
    struct lv_dominfo li;
    assert_int_equal(lv_xml_parse_domain(out, &li, why, sizeof(why)), 0);
    assert_int_equal(li.nmems, 0); /* the DIMM folded away */
    assert_int_equal(li.memory_kib, 768 * 1024);
    assert_int_equal(li.current_kib, 768 * 1024);
    assert_int_equal(li.cells[0].mem_kib, 768 * 1024);
    assert_int_equal(li.effective_kib, 768 * 1024);
    assert_int_equal(li.vcpu_current, 2);
    assert_int_equal(li.vcpu_max, 4); /* hot-plug room kept */
    assert_int_equal(li.max_kib, 8388608);
    assert_non_null(strstr(out, "<uuid>71685b29-9606-4fec-8013-545635eb64f1</uuid>"));
    free(out);

    /* virtio-mem folded as well; two cells share the memory; maxMemory grows to fit */
    const char *two =
        "<domain><maxMemory slots='2' unit='MiB'>3072</maxMemory><memory unit='MiB'>3072"
        "</memory><vcpu current='2'>2</vcpu><cpu><numa><cell id='0' cpus='0' memory='1024' "
        "unit='MiB'/><cell id='1' cpus='1' memory='1024' unit='MiB'/></numa></cpu><devices>"
        "<memory model='virtio-mem'><target><size unit='MiB'>1024</size><node>0</node>"
        "<block unit='MiB'>2</block><requested unit='MiB'>512</requested></target></memory>"
        "</devices><metadata><hvupdater:operation xmlns:hvupdater="
        "'https://hvupdater.dev/xmlns/operation/1'>{&quot;a&quot;:1}</hvupdater:operation>"
        "</metadata></domain>";
    struct hv_hw big = {4097, 3, -1, -1};
    assert_int_equal(lv_cold_rewrite_xml(two, &big, &out, why, sizeof(why)), 0);
    assert_int_equal(lv_xml_parse_domain(out, &li, why, sizeof(why)), 0);
    assert_int_equal(li.nmems, 0); /* virtio-mem folded too */
    assert_int_equal(li.cells[0].mem_kib, 2049 * 1024);
    assert_int_equal(li.cells[1].mem_kib, 2048 * 1024);
    assert_int_equal(li.memory_kib, 4097 * 1024);
    assert_int_equal(li.max_kib, 4097 * 1024);
    assert_int_equal(li.slots, 2);
    assert_int_equal(li.effective_kib, 4097 * 1024);
    assert_int_equal(li.vcpu_max, 3);
    assert_int_equal(li.vcpu_current, 3);
    assert_non_null(strstr(out, "cpus=\"0,2\"")); /* the new vCPU joins the first cell */
    assert_non_null(strstr(out, "{\"a\":1}</hvupdater:operation>")); /* kept */
    free(out);
}

static void test_cold_rewrite_keeps_nvdimm(void **state)
{
    (void)state;
    const char *nv =
        "<domain><maxMemory slots='4' unit='MiB'>8192</maxMemory><memory unit='MiB'>1536"
        "</memory><vcpu>1</vcpu><cpu><numa><cell id='0' cpus='0' memory='1024' unit='MiB'/>"
        "</numa></cpu><devices><memory model='nvdimm'><source><path>/tmp/nv</path></source>"
        "<target><size unit='MiB'>512</size><node>0</node></target></memory></devices>"
        "</domain>";
    char *out = NULL, why[256];
    struct hv_hw want = {2048, -1, -1, -1};
    assert_int_equal(lv_cold_rewrite_xml(nv, &want, &out, why, sizeof(why)), 0);
    struct lv_dominfo li;
    assert_int_equal(lv_xml_parse_domain(out, &li, why, sizeof(why)), 0);
    assert_int_equal(li.nmems, 1); /* storage, not RAM: kept */
    assert_int_equal(li.mems[0].model, LV_MEM_OTHER);
    assert_int_equal(li.memory_kib, (2048 + 512) * 1024);
    assert_int_equal(li.cells[0].mem_kib, 2048 * 1024);
    free(out);
}

static void test_cold_rewrite_topology(void **state)
{
    (void)state;
    char *out = NULL, why[256];
    struct lv_dominfo li;
    /* cores 2 on a 4-socket topology: max stays 4 = 2 sockets x 2 cores */
    struct hv_hw want = {-1, 3, 2, -1};
    assert_int_equal(lv_cold_rewrite_xml(DIMM_LIVE, &want, &out, why, sizeof(why)), 0);
    assert_int_equal(lv_xml_parse_domain(out, &li, why, sizeof(why)), 0);
    assert_int_equal(li.cores, 2);
    assert_int_equal(li.sockets, 2);
    assert_int_equal(li.vcpu_max, 4);
    assert_int_equal(li.vcpu_current, 3);
    assert_int_equal(li.nmems, 1); /* memory untouched */
    free(out);
    /* no topology before: cores 4 with 6 vCPUs rounds the maximum up to 8 = 2 x 4 */
    struct hv_hw six = {-1, 6, 4, -1};
    assert_int_equal(lv_cold_rewrite_xml(PLAIN, &six, &out, why, sizeof(why)), 0);
    assert_int_equal(lv_xml_parse_domain(out, &li, why, sizeof(why)), 0);
    assert_int_equal(li.cores, 4);
    assert_int_equal(li.sockets, 2);
    assert_int_equal(li.vcpu_max, 8);
    assert_int_equal(li.vcpu_current, 6);
    free(out);
    /* shrink on the plain domain: vcpu max stays, current drops */
    struct hv_hw one = {512, 1, -1, -1};
    assert_int_equal(lv_cold_rewrite_xml(PLAIN, &one, &out, why, sizeof(why)), 0);
    assert_int_equal(lv_xml_parse_domain(out, &li, why, sizeof(why)), 0);
    assert_int_equal(li.vcpu_max, 2);
    assert_int_equal(li.vcpu_current, 1);
    assert_int_equal(li.effective_kib, 512 * 1024);
    free(out);
    struct hv_hw bad = {0, -1, -1, -1};
    assert_int_equal(lv_cold_rewrite_xml(PLAIN, &bad, &out, why, sizeof(why)), -1);
    assert_null(out);
}

/* Topology values from domain XML multiplied as int overflowed (65536 x 65536 x 1 is 0 in 32
 * bits: a division by zero). Now a topology larger than a domain can have is refused. */
static void test_cold_rewrite_topology_too_large(void **state)
{
    (void)state;
    char *out = NULL, why[256] = "";
    static const char *const huge[] = {
        "<domain type='qemu'><name>hvt-t</name><memory unit='MiB'>1024</memory><vcpu>2</vcpu>"
        "<cpu><topology sockets='1' dies='1' cores='65536' threads='65536'/></cpu></domain>",
        "<domain type='qemu'><name>hvt-t</name><memory unit='MiB'>1024</memory><vcpu>2</vcpu>"
        "<cpu><topology sockets='1' dies='65536' cores='65536' threads='1'/></cpu></domain>",
    };
    struct hv_hw want = {-1, 3, -1, -1};
    for (size_t k = 0; k < sizeof(huge) / sizeof(huge[0]); k++) {
        assert_int_equal(lv_cold_rewrite_xml(huge[k], &want, &out, why, sizeof(why)), -1);
        assert_null(out);
        assert_non_null(strstr(why, "vCPUs"));
    }
    /* cores from the desired hardware times the domain's threads */
    struct hv_hw cores = {-1, 3, 1 << 20, -1};
    assert_int_equal(lv_cold_rewrite_xml(huge[0], &cores, &out, why, sizeof(why)), -1);
    assert_null(out);
}

static void test_vmem_device_xml(void **state)
{
    (void)state;
    char addr[64];
    char *dev = lv_xml_vmem_device(VMEM_LIVE, 0, NULL, 524288, addr, sizeof(addr));
    assert_non_null(dev);
    assert_string_equal(addr, "0x0000:0x03:0x00.0x0");
    assert_non_null(strstr(dev, "<requested unit=\"KiB\">524288</requested>"));
    assert_null(strstr(dev, "<current"));
    assert_non_null(strstr(dev, "virtiomem0"));
    free(dev);
    assert_null(lv_xml_vmem_device(DIMM_LIVE, 0, NULL, 1, NULL, 0)); /* a DIMM, not virtio-mem */
}

static void test_record_escaping(void **state)
{
    (void)state;
    const char *texts[] = {
        "{\"op\":\"grow\",\"to\":1536}",
        "a<b>&c;&amp; ' \" ]]> \t tab\nline\r\ncrlf",
        "  leading and trailing  ",
        "\xc3\xa9t\xc3\xa9 \xe2\x9c\x93",
    };
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        char *el = lv_xml_record_element(texts[i]);
        assert_non_null(el);
        char *back = lv_xml_element_text(el);
        assert_non_null(back);
        assert_string_equal(back, texts[i]);
        free(back);
        free(el);
    }
}

static void test_error_map(void **state)
{
    (void)state;
    assert_int_equal(lv_error_map(VIR_ERR_NO_DOMAIN, VIR_FROM_QEMU, ""), HV_E_NOT_FOUND);
    assert_int_equal(lv_error_map(VIR_ERR_OPERATION_INVALID, VIR_FROM_QEMU, ""),
                     HV_E_INVALID_STATE);
    assert_int_equal(lv_error_map(VIR_ERR_OPERATION_TIMEOUT, VIR_FROM_QEMU, "agent"), HV_E_TIMEOUT);
    assert_int_equal(
        lv_error_map(VIR_ERR_OPERATION_TIMEOUT, VIR_FROM_QEMU, "cannot acquire state change lock"),
        HV_E_BUSY);
    assert_int_equal(lv_error_map(VIR_ERR_SYSTEM_ERROR, VIR_FROM_RPC, ""), HV_E_UNREACHABLE);
    assert_int_equal(lv_error_map(VIR_ERR_SYSTEM_ERROR, VIR_FROM_QEMU, ""), HV_E_INTERNAL);
    assert_int_equal(lv_error_map(VIR_ERR_INTERNAL_ERROR, VIR_FROM_RPC, ""), HV_E_UNREACHABLE);
    assert_int_equal(lv_error_map(VIR_ERR_NO_CONNECT, VIR_FROM_NONE, ""), HV_E_UNREACHABLE);
    assert_int_equal(lv_error_map(VIR_ERR_AUTH_FAILED, VIR_FROM_RPC, ""), HV_E_AUTH);
    assert_int_equal(lv_error_map(VIR_ERR_ACCESS_DENIED, VIR_FROM_ACCESS, ""), HV_E_AUTH);
    assert_int_equal(lv_error_map(VIR_ERR_OPERATION_UNSUPPORTED, VIR_FROM_QEMU, ""),
                     HV_E_UNSUPPORTED);
    assert_int_equal(lv_error_map(VIR_ERR_CONFIG_UNSUPPORTED, VIR_FROM_QEMU, ""), HV_E_UNSUPPORTED);
    assert_int_equal(lv_error_map(VIR_ERR_NO_SUPPORT, VIR_FROM_NONE, ""), HV_E_UNSUPPORTED);
    assert_int_equal(lv_error_map(VIR_ERR_AGENT_UNRESPONSIVE, VIR_FROM_QEMU, ""), HV_E_TIMEOUT);
    assert_int_equal(lv_error_map(VIR_ERR_RESOURCE_BUSY, VIR_FROM_QEMU, ""), HV_E_BUSY);
    assert_int_equal(lv_error_map(VIR_ERR_INTERNAL_ERROR, VIR_FROM_QEMU,
                                  "unable to execute QEMU command 'object-add': cannot set up "
                                  "guest memory 'memdimm0': Cannot allocate memory"),
                     HV_E_RESOURCES);
    assert_int_equal(lv_error_map(VIR_ERR_XML_ERROR, VIR_FROM_DOMAIN, ""), HV_E_INTERNAL);
    struct lv_lasterr dead = {VIR_ERR_SYSTEM_ERROR, VIR_FROM_RPC, "Cannot write data"};
    struct lv_lasterr alive = {VIR_ERR_SYSTEM_ERROR, VIR_FROM_QEMU, "cgroup"};
    assert_true(lv_error_is_dead_conn(&dead));
    assert_false(lv_error_is_dead_conn(&alive));
}

static void test_uri_remote(void **state)
{
    (void)state;
    assert_false(lv_uri_is_remote("qemu:///system"));
    assert_false(lv_uri_is_remote("test:///default"));
    assert_true(lv_uri_is_remote("qemu+ssh://root@h/system"));
    assert_true(lv_uri_is_remote("qemu+unix:///system"));
    assert_true(lv_uri_is_remote("qemu://h/system"));
    assert_int_equal(lv_align_up(100, 128), 128);
    assert_true(lv_is_aligned(256, 128));
    assert_false(lv_is_aligned(200, 128));
}

/* Which <disk> a target names, and the disk rules: growth only, file and volume disks, a
 * running domain live, an off one only through a storage volume, raw block devices never. */
static void test_disk_xml_and_rules(void **state)
{
    (void)state;
    const char *xml =
        "<domain type='qemu'><name>d</name><memory>1048576</memory><devices>"
        "<disk type='file' device='cdrom'><source file='/iso/x.iso'/><target dev='hdc'/>"
        "<readonly/></disk>"
        "<disk type='file' device='disk'><driver name='qemu' type='qcow2'/>"
        "<source file='/img/a.qcow2'/><target dev='vda' bus='virtio'/></disk>"
        "<disk type='block' device='disk'><source dev='/dev/vg0/lv1'/><target dev='vdb'/></disk>"
        "<disk type='volume' device='disk'><source pool='p1' volume='v1'/><target dev='vdc'/>"
        "</disk>"
        "<disk type='network' device='disk'><source protocol='rbd' name='p/i'/>"
        "<target dev='vdd'/></disk></devices></domain>";
    struct lv_disk dk;
    struct hv_field_plan p;
    assert_int_equal(lv_xml_disk(xml, "vda", &dk), 0);
    assert_true(dk.found);
    assert_string_equal(dk.type, "file");
    assert_string_equal(dk.device, "disk");
    assert_string_equal(dk.source, "/img/a.qcow2");
    assert_int_equal(dk.capacity, -1);
    assert_int_equal(lv_disk_mib(&dk), -1);
    dk.capacity = 1024LL * 1024 * 1024;
    assert_int_equal(lv_disk_mib(&dk), 1024);
    lv_plan_disk(&dk, true, false, 2048, &p);
    assert_int_equal(p.how, HV_HOW_LIVE);
    assert_string_equal(p.method, "block-resize");
    lv_plan_disk(&dk, true, false, 1023, &p);
    assert_int_equal(p.how, HV_HOW_IMPOSSIBLE);
    assert_string_equal(p.reason, "disks cannot shrink");
    lv_plan_disk(&dk, false, true, 2048, &p);
    assert_int_equal(p.how, HV_HOW_COLD);
    lv_plan_disk(&dk, false, false, 2048, &p);
    assert_int_equal(p.how, HV_HOW_IMPOSSIBLE);
    assert_non_null(strstr(p.reason, "in no libvirt storage pool"));

    assert_int_equal(lv_xml_disk(xml, "vdb", &dk), 0);
    assert_string_equal(dk.type, "block");
    assert_string_equal(dk.source, "/dev/vg0/lv1");
    dk.capacity = 1024LL * 1024 * 1024;
    lv_plan_disk(&dk, true, false, 2048, &p);
    assert_int_equal(p.how, HV_HOW_IMPOSSIBLE);
    assert_string_equal(p.reason, "the disk is a raw block device, which libvirt cannot grow; "
                                  "grow it on the host");

    assert_int_equal(lv_xml_disk(xml, "vdc", &dk), 0);
    assert_string_equal(dk.type, "volume");
    assert_string_equal(dk.pool, "p1");
    assert_string_equal(dk.volume, "v1");
    dk.capacity = 0;
    lv_plan_disk(&dk, true, false, 10, &p);
    assert_int_equal(p.how, HV_HOW_LIVE);

    assert_int_equal(lv_xml_disk(xml, "vdd", &dk), 0);
    dk.capacity = 0;
    lv_plan_disk(&dk, true, false, 10, &p);
    assert_int_equal(p.how, HV_HOW_IMPOSSIBLE);
    assert_string_equal(p.reason, "libvirt can grow file and storage volume disks only");

    assert_int_equal(lv_xml_disk(xml, "hdc", &dk), 0);
    dk.capacity = 0;
    lv_plan_disk(&dk, true, false, 10, &p);
    assert_string_equal(p.reason, "the target device is not a disk (e.g. a CD-ROM)");

    assert_int_equal(lv_xml_disk(xml, "sda", &dk), 0);
    assert_false(dk.found);
    lv_plan_disk(&dk, true, false, 10, &p);
    assert_string_equal(p.reason, "the domain has no disk with that target device");

    dk.found = true; /* found, but libvirt gave no size: never guess */
    snprintf(dk.device, sizeof(dk.device), "disk");
    snprintf(dk.type, sizeof(dk.type), "file");
    dk.capacity = -1;
    lv_plan_disk(&dk, true, false, 10, &p);
    assert_string_equal(p.reason, "libvirt does not report the disk's capacity");
    assert_int_equal(lv_xml_disk("<not-xml", "vda", &dk), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_units),
        cmocka_unit_test(test_cpuset),
        cmocka_unit_test(test_parse_dimm),
        cmocka_unit_test(test_parse_vmem_counts_current_not_requested),
        cmocka_unit_test(test_parse_plain_and_balloon),
        cmocka_unit_test(test_parse_rejects),
        cmocka_unit_test(test_plan_memory_methods),
        cmocka_unit_test(test_plan_memory_slots_numa_acpi),
        cmocka_unit_test(test_plan_compute),
        cmocka_unit_test(test_cold_rewrite_folds),
        cmocka_unit_test(test_cold_rewrite_keeps_nvdimm),
        cmocka_unit_test(test_cold_rewrite_topology),
        cmocka_unit_test(test_cold_rewrite_topology_too_large),
        cmocka_unit_test(test_vmem_device_xml),
        cmocka_unit_test(test_record_escaping),
        cmocka_unit_test(test_error_map),
        cmocka_unit_test(test_uri_remote),
        cmocka_unit_test(test_disk_xml_and_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* vcsim_harness.c: launcher process control (fork/exec, ready line, SIGTERM), info.json
 * parsing with yajl, the /hvtest control endpoints over HTTPS with libcurl, and a
 * QueryEvents call made through the backend's own SOAP session (test-only helper).
 */
#include "vcsim_harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <curl/curl.h>
#include <yajl/yajl_tree.h>

#include "vs_soap.h"
#include "vs_test.h"
#include "vs_xml.h"

double vcsim_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    struct vs_buf b;
    vs_buf_init(&b);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        vs_buf_addn(&b, chunk, n);
    fclose(f);
    if (b.failed || !b.data) {
        vs_buf_free(&b);
        return NULL;
    }
    return b.data; /* ownership moves to the caller (free) */
}

static void copy_str(yajl_val root, const char *key, char *out, size_t outlen)
{
    const char *path[] = {key, NULL};
    yajl_val v = yajl_tree_get(root, path, yajl_t_string);
    snprintf(out, outlen, "%s", v ? YAJL_GET_STRING(v) : "");
}

static int read_info(struct vcsim *v)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/info.json", v->dir);
    char *text = slurp(path);
    if (!text)
        return -1;
    char errbuf[256];
    yajl_val root = yajl_tree_parse(text, errbuf, sizeof(errbuf));
    free(text);
    if (!root)
        return -1;
    copy_str(root, "url", v->url, sizeof(v->url));
    copy_str(root, "host", v->host, sizeof(v->host));
    copy_str(root, "username", v->username, sizeof(v->username));
    copy_str(root, "password_file", v->password_file, sizeof(v->password_file));
    copy_str(root, "cert", v->cert, sizeof(v->cert));
    copy_str(root, "ca", v->ca, sizeof(v->ca));
    copy_str(root, "thumbprint_sha1", v->sha1, sizeof(v->sha1));
    copy_str(root, "thumbprint_sha256", v->sha256, sizeof(v->sha256));
    copy_str(root, "control_url", v->control_url, sizeof(v->control_url));
    const char *vms_path[] = {"vms", NULL};
    yajl_val vms = yajl_tree_get(root, vms_path, yajl_t_array);
    v->nvms = 0;
    for (size_t i = 0; vms && i < vms->u.array.len && i < VCSIM_MAX_VMS; i++) {
        yajl_val vm = vms->u.array.values[i];
        struct vcsim_vm *out = &v->vms[v->nvms++];
        copy_str(vm, "name", out->name, sizeof(out->name));
        copy_str(vm, "uuid", out->uuid, sizeof(out->uuid));
        copy_str(vm, "moref", out->moref, sizeof(out->moref));
        copy_str(vm, "host", out->host, sizeof(out->host));
    }
    yajl_tree_free(root);
    return v->url[0] ? 0 : -1;
}

/* Wait for "VCSIM_READY" on fd, up to timeout_ms. */
static int wait_ready(int fd, int timeout_ms)
{
    char buf[1024];
    size_t len = 0;
    double end = vcsim_now_ms() + timeout_ms;
    while (vcsim_now_ms() < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int left = (int)(end - vcsim_now_ms());
        if (poll(&p, 1, left > 0 ? left : 0) <= 0)
            continue;
        ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
        if (n <= 0)
            return -1; /* the launcher exited */
        len += (size_t)n;
        buf[len] = '\0';
        if (strstr(buf, "VCSIM_READY"))
            return 0;
        if (len == sizeof(buf) - 1)
            len = 0;
    }
    return -1;
}

int vcsim_start(struct vcsim *v, const char *const *flags)
{
    memset(v, 0, sizeof(*v));
    v->pid = -1;
    v->stdin_fd = -1;
    const char *bin = getenv("HV_VCSIM_BIN");
    if (!bin || !*bin || access(bin, X_OK) != 0) {
        fprintf(stderr,
                "\n*** HV_VCSIM_BIN is %s%s%s: build the launcher with "
                "test/vcsim/build.sh <path> and point HV_VCSIM_BIN at it ***\n\n",
                bin ? "'" : "unset", bin ? bin : "", bin ? "' (not executable)" : "");
        return -1;
    }
    snprintf(v->dir, sizeof(v->dir), "/tmp/hv-vcsim-XXXXXX");
    if (!mkdtemp(v->dir)) {
        perror("mkdtemp");
        return -1;
    }
    const char *argv[64];
    size_t argc = 0;
    argv[argc++] = bin;
    argv[argc++] = "-dir";
    argv[argc++] = v->dir;
    argv[argc++] = "-stdin";
    for (size_t i = 0; flags && flags[i] && argc < 62; i++)
        argv[argc++] = flags[i];
    argv[argc] = NULL;

    int out[2], in[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(in, O_CLOEXEC) != 0) {
        perror("pipe");
        return -1;
    }
    double t0 = vcsim_now_ms();
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return -1;
    }
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    v->pid = pid;
    /* in[1] stays open until vcsim_stop: when the test dies, the launcher sees EOF on its
     * stdin and exits by itself. */
    v->stdin_fd = in[1];
    int rc = wait_ready(out[0], 30000);
    close(out[0]);
    v->start_ms = vcsim_now_ms() - t0;
    if (rc != 0 || read_info(v) != 0) {
        fprintf(stderr, "\n*** vcsim launcher %s did not become ready ***\n\n", bin);
        vcsim_stop(v);
        return -1;
    }
    return 0;
}

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

void vcsim_stop(struct vcsim *v)
{
    if (v->stdin_fd > 0)
        close(v->stdin_fd);
    v->stdin_fd = -1;
    if (v->pid > 0) {
        kill(v->pid, SIGTERM);
        int status;
        bool gone = false;
        for (int i = 0; i < 100 && !gone; i++) {
            gone = waitpid(v->pid, &status, WNOHANG) == v->pid;
            if (!gone)
                usleep(50000);
        }
        if (!gone) {
            kill(v->pid, SIGKILL);
            waitpid(v->pid, &status, 0);
        }
        v->pid = -1;
    }
    if (v->dir[0])
        remove_dir(v->dir);
    v->dir[0] = '\0';
}

const struct vcsim_vm *vcsim_vm(const struct vcsim *v, size_t index)
{
    return index < v->nvms ? &v->vms[index] : NULL;
}

struct hv_vsphere_server vcsim_server(const struct vcsim *v)
{
    struct hv_vsphere_server s = {
        .name = "vcsim",
        .url = v->url,
        .username = v->username,
        .password_file = v->password_file,
        .thumbprint = v->sha256,
        .call_timeout_ms = 5000,
    };
    return s;
}

struct hv_backend *vcsim_backend(const struct hv_vsphere_server *cfg)
{
    char err[256];
    struct hv_backend *b = hv_vsphere_new(cfg, 1, err, sizeof(err));
    if (!b) {
        fprintf(stderr, "hv_vsphere_new: %s\n", err);
        abort();
    }
    return b;
}

static size_t collect(char *data, size_t size, size_t n, void *user)
{
    struct vs_buf *b = user;
    vs_buf_addn(b, data, size * n);
    return size * n;
}

static int control(const struct vcsim *v, const char *what, bool post, struct vs_buf *out)
{
    char url[300];
    snprintf(url, sizeof(url), "%s/%s", v->control_url, what);
    CURL *h = curl_easy_init();
    if (!h)
        return -1;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CAINFO, v->ca);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    if (post)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
    CURLcode rc = curl_easy_perform(h);
    curl_easy_cleanup(h);
    return rc == CURLE_OK && !out->failed ? 0 : -1;
}

long vcsim_calls(const struct vcsim *v, const char *method)
{
    struct vs_buf out;
    vs_buf_init(&out);
    long n = -1;
    if (control(v, "stats", false, &out) == 0) {
        yajl_val root = yajl_tree_parse(out.data, NULL, 0);
        const char *all[] = {"requests", NULL};
        const char *one[] = {"calls", method, NULL};
        yajl_val val = yajl_tree_get(root, method ? one : all, yajl_t_number);
        n = val ? (long)YAJL_GET_INTEGER(val) : (root ? 0 : -1);
        yajl_tree_free(root);
    }
    vs_buf_free(&out);
    return n;
}

int vcsim_expire_sessions(const struct vcsim *v)
{
    struct vs_buf out;
    vs_buf_init(&out);
    int n = -1;
    if (control(v, "expire-sessions", true, &out) == 0) {
        yajl_val root = yajl_tree_parse(out.data, NULL, 0);
        const char *path[] = {"expired", NULL};
        yajl_val val = yajl_tree_get(root, path, yajl_t_number);
        n = val ? (int)YAJL_GET_INTEGER(val) : -1;
        yajl_tree_free(root);
    }
    vs_buf_free(&out);
    return n;
}

int vcsim_count_events(struct hv_backend *b, const char *moref, const char *type)
{
    struct vs_server *s = vs_backend_server(b, 0);
    struct hv_err err = {0};
    const struct vs_content *c = s ? vs_session(s, 0, &err) : NULL;
    if (!c || !c->event_manager[0])
        return -1;
    struct vs_buf req;
    vs_buf_init(&req);
    vs_env_begin(&req, "QueryEvents", "EventManager", c->event_manager);
    vs_buf_add(&req, "<filter><entity>");
    vs_buf_moref(&req, "entity", "VirtualMachine", moref);
    vs_buf_add(&req, "<recursion>self</recursion></entity><maxCount>1000</maxCount></filter>");
    vs_env_end(&req, "QueryEvents");
    struct vs_reply r;
    int rc = vs_call(s, "QueryEvents", &req, 0, &r, &err);
    vs_buf_free(&req);
    if (rc != HV_OK) {
        fprintf(stderr, "QueryEvents: %s\n", err.detail);
        return -1;
    }
    int n = 0;
    for (xmlNodePtr e = vs_xml_child(r.body, "returnval"); e; e = vs_xml_next(e, "returnval")) {
        char t[96];
        vs_xml_xsi_type(e, t, sizeof(t));
        n += strcmp(t, type) == 0;
    }
    vs_reply_free(&r);
    return n;
}

/*
** template.c — the templates folder: kernel sources by relative name and the
** shared device headers (common/ *.cuh) that NVRTC receives by name.
** Invariant: no name that could leave the folder is ever opened.
*/
#include "autotune.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FILES 64

struct at_templates {
    char root[1024];
    int nheaders;
    char *header_name[MAX_FILES];
    char *header_src[MAX_FILES];
    int nsources;
    char *source_name[MAX_FILES];
    char *source_text[MAX_FILES];
};

/* Reads a regular file of at most 16 MiB. O_NONBLOCK: opening a FIFO that
** no process writes would otherwise wait forever; anything but a regular
** file is refused. */
static int read_file(const char *path, char **out)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    FILE *f = NULL;
    char *buf = NULL;
    long n;
    *out = NULL;
    if (fd < 0)
        return at_fail(AT_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || fcntl(fd, F_SETFL, 0) != 0 || !(f = fdopen(fd, "rb"))) {
        close(fd);
        return at_fail(AT_ERR_IO, "cannot read %s: not a regular file of at most 16 MiB", path);
    }
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
        n > (16L << 20)) {
        fclose(f);
        return at_fail(AT_ERR_IO, "cannot read %s: not a regular file of at most 16 MiB", path);
    }
    buf = malloc((size_t)n + 1);
    if (!buf) {
        fclose(f);
        return at_fail(AT_ERR_NOMEM, "out of memory reading %s", path);
    }
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        fclose(f);
        return at_fail(AT_ERR_IO, "cannot read %s: short read", path);
    }
    buf[n] = '\0';
    fclose(f);
    *out = buf;
    return AT_OK;
}

/* Only [A-Za-z0-9_.-/] names, relative, without "..", "//" or "./" parts. */
static int safe_name(const char *name)
{
    if (!name || !*name || name[0] == '/' || strlen(name) > 200)
        return 0;
    for (const char *p = name; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.' || c == '/'))
            return 0;
    }
    if (strstr(name, "..") || strstr(name, "//") || strncmp(name, "./", 2) == 0 ||
        strstr(name, "/./"))
        return 0;
    return 1;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int at_templates_open(const char *root, at_templates **out)
{
    at_templates *t = calloc(1, sizeof *t);
    char dir[1100], path[1400];
    DIR *d;
    struct dirent *e;
    int rc = AT_OK;
    *out = NULL;
    if (!t)
        return at_fail(AT_ERR_NOMEM, "out of memory");
    if (strlen(root) >= sizeof t->root) {
        free(t);
        return at_fail(AT_ERR_USAGE, "templates path too long: %s", root);
    }
    strcpy(t->root, root);
    snprintf(dir, sizeof dir, "%s/common", root);
    if (!(d = opendir(dir))) {
        rc = at_fail(AT_ERR_IO, "cannot open templates folder %s: %s", dir, strerror(errno));
        free(t);
        return rc;
    }
    while ((e = readdir(d)) != NULL && rc == AT_OK) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".cuh") != 0)
            continue;
        if (t->nheaders == MAX_FILES) {
            rc = at_fail(AT_ERR_IO, "too many headers in %s", dir);
            break;
        }
        char *name = malloc(len + 8);
        if (!name) {
            rc = at_fail(AT_ERR_NOMEM, "out of memory");
            break;
        }
        snprintf(name, len + 8, "common/%s", e->d_name);
        t->header_name[t->nheaders++] = name;
    }
    closedir(d);
    /* sorted, so the order (and the space hash) does not depend on readdir */
    qsort(t->header_name, (size_t)t->nheaders, sizeof(char *), cmp_str);
    for (int i = 0; i < t->nheaders && rc == AT_OK; i++) {
        snprintf(path, sizeof path, "%s/%s", root, t->header_name[i]);
        rc = read_file(path, &t->header_src[i]);
    }
    if (rc != AT_OK) {
        at_templates_free(t);
        return rc;
    }
    *out = t;
    return AT_OK;
}

void at_templates_free(at_templates *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->nheaders; i++) {
        free(t->header_name[i]);
        free(t->header_src[i]);
    }
    for (int i = 0; i < t->nsources; i++) {
        free(t->source_name[i]);
        free(t->source_text[i]);
    }
    free(t);
}

int at_templates_source(at_templates *t, const char *name, const char **source)
{
    char path[1400];
    char *text;
    int rc;
    *source = NULL;
    if (!safe_name(name))
        return at_fail(AT_ERR_SPEC, "template name '%s' leaves the templates folder or has odd characters",
                       name ? name : "");
    for (int i = 0; i < t->nsources; i++)
        if (strcmp(t->source_name[i], name) == 0) {
            *source = t->source_text[i];
            return AT_OK;
        }
    if (t->nsources == MAX_FILES)
        return at_fail(AT_ERR_SPEC, "too many templates (at most %d)", MAX_FILES);
    snprintf(path, sizeof path, "%s/%s", t->root, name);
    if ((rc = read_file(path, &text)) != AT_OK)
        return rc;
    t->source_name[t->nsources] = strdup(name);
    if (!t->source_name[t->nsources]) {
        free(text);
        return at_fail(AT_ERR_NOMEM, "out of memory");
    }
    t->source_text[t->nsources++] = text;
    *source = text;
    return AT_OK;
}

int at_templates_nheaders(const at_templates *t) { return t->nheaders; }
const char *at_templates_header_name(const at_templates *t, int i) { return t->header_name[i]; }
const char *at_templates_header_source(const at_templates *t, int i) { return t->header_src[i]; }
const char *at_templates_root(const at_templates *t) { return t->root; }

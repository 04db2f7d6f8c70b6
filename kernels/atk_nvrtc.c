/*
** atk_nvrtc.c — rebuilding a winner's cubin for this GPU with NVRTC, at
** atk_open only: the template source, the shared headers under their
** include names ("common/vec.cuh"), the key's compile options (which name
** this GPU's architecture: entries are only ever for this GPU) and one
** -DTP_X=v per stored parameter, exactly as the tuner compiled it.
*/
#include "atk_internal.h"

#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int atk__nvrtc_compile(const char *name, const char *source, atk_sources *src, const char *options,
                       const char *params, void **cubin, size_t *size, char *why, size_t len)
{
    const char *hnames[64], *htexts[64], *argv[64];
    char store[1024];
    int nh = 0, argc = 0;
    nvrtcProgram prog = NULL;
    nvrtcResult r;
    *cubin = NULL;
    *size = 0;
    if (src->table) {
        for (size_t i = 0; i < src->table->nsources && nh < 64; i++) {
            const atk_table_source *s = &src->table->sources[i];
            if (s->name && s->text && !strncmp(s->name, "common/", 7)) {
                hnames[nh] = s->name;
                htexts[nh++] = s->text;
            }
        }
    } else {
        for (int i = 0; i < src->n && nh < 64; i++) {
            hnames[nh] = src->names[i];
            htexts[nh++] = src->texts[i];
        }
    }
    /* options, then -D per parameter, split on spaces */
    size_t pos = (size_t)snprintf(store, sizeof store, "%s", options);
    for (const char *p = params; *p && pos < sizeof store;) {
        while (*p == ' ')
            p++;
        size_t n = strcspn(p, " ");
        if (n)
            pos += (size_t)snprintf(store + pos, sizeof store - pos, " -D%.*s", (int)n, p);
        p += n;
    }
    if (pos >= sizeof store) {
        snprintf(why, len, "nvrtc: options too long");
        return 0;
    }
    char *save = NULL;
    for (char *t = strtok_r(store, " ", &save); t && argc < 64; t = strtok_r(NULL, " ", &save))
        argv[argc++] = t;
    if ((r = nvrtcCreateProgram(&prog, source, name, nh, htexts, hnames)) != NVRTC_SUCCESS) {
        snprintf(why, len, "nvrtc: nvrtcCreateProgram(%s): %s", name, nvrtcGetErrorString(r));
        return 0;
    }
    r = nvrtcCompileProgram(prog, argc, argv);
    if (r != NVRTC_SUCCESS) {
        size_t n = 0;
        char log[256] = "";
        if (nvrtcGetProgramLogSize(prog, &n) == NVRTC_SUCCESS && n > 1) {
            char *full = malloc(n);
            if (full && nvrtcGetProgramLog(prog, full) == NVRTC_SUCCESS)
                snprintf(log, sizeof log, "%s", full);
            free(full);
        }
        for (char *p = log; *p; p++)
            if (*p == '\n')
                *p = ' ';
        snprintf(why, len, "nvrtc: %s does not compile: %s", name, log);
        nvrtcDestroyProgram(&prog);
        return 0;
    }
    size_t n = 0;
    if (nvrtcGetCUBINSize(prog, &n) != NVRTC_SUCCESS || !n || !(*cubin = malloc(n)) ||
        nvrtcGetCUBIN(prog, *cubin) != NVRTC_SUCCESS) {
        free(*cubin);
        *cubin = NULL;
        snprintf(why, len, "nvrtc: %s: no cubin", name);
        nvrtcDestroyProgram(&prog);
        return 0;
    }
    *size = n;
    nvrtcDestroyProgram(&prog);
    return 1;
}

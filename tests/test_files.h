/*
** test_files.h — whole-file reads and writes for the test programs (one
** copy instead of one per test file). Include after the system headers.
*/
#ifndef AT_TEST_FILES_H
#define AT_TEST_FILES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The whole file in a malloc'ed buffer, NUL-terminated when read in full;
** *size is 0 when it could not be read (NULL if it could not be opened). */
static inline unsigned char *tt_slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    long n;
    *size = 0;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc((size_t)n + 1);
        if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) {
            buf[n] = '\0';
            *size = (size_t)n;
        }
    }
    fclose(f);
    return buf;
}

/* Writes size bytes to path (replacing it): 0, or -1 on any failure. */
static inline int tt_spit(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(data, 1, size, f);
    return (fclose(f) == 0 && w == size) ? 0 : -1;
}

#endif

/*
** replay.c — runs a fuzz harness's LLVMFuzzerTestOneInput over the files named
** on the command line, without libFuzzer: a plain regression test (built with
** gcc + ASan/UBSan by fuzz/run.sh) for the seed corpora and fuzz/regressions/.
** Exits 0 when every input ran; a broken invariant aborts, as under the fuzzer,
** and an input that runs past REPLAY_TIMEOUT seconds exits 124 (a hang).
*/
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define REPLAY_TIMEOUT 30 /* seconds per input: run.sh's sandbox stops a spec after 2 s */
#define STR_(x) #x
#define STR(x) STR_(x)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads the whole file into an exactly-sized malloc'ed buffer (so ASan sees
** an overread by one byte, as under libFuzzer). Returns NULL on failure. */
static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    long n;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc(n ? (size_t)n : 1)) && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    *len = buf ? (size_t)n : 0;
    fclose(f);
    return buf;
}

static void on_alarm(int sig)
{
    static const char msg[] = "replay: TIMEOUT: the input above ran past " STR(REPLAY_TIMEOUT) " s (a hang)\n";
    (void)sig;
    ssize_t n = write(2, msg, sizeof msg - 1); /* async-signal-safe, unlike stdio */
    (void)n;
    _exit(124);
}

int main(int argc, char **argv)
{
    signal(SIGALRM, on_alarm);
    for (int i = 1; i < argc; i++) {
        size_t len;
        uint8_t *data = read_file(argv[i], &len);
        if (!data) {
            fprintf(stderr, "replay: cannot read %s\n", argv[i]);
            return 1;
        }
        fprintf(stderr, "replay: %s (%zu bytes)\n", argv[i], len);
        alarm(REPLAY_TIMEOUT);
        LLVMFuzzerTestOneInput(data, len);
        alarm(0);
        free(data);
    }
    printf("replay: %d inputs ran\n", argc - 1);
    return 0;
}

/*
 * fuzz.h - what the libFuzzer harnesses of fuzz/ share (README.md there).
 *
 * A harness feeds libFuzzer's bytes to one reader and checks what the reader
 * promises on any input: success, or an error whose status and one-line
 * message agree (core.h: sf_error) and name the input. On success it checks
 * a round trip where the format has a writer: what was read writes, reads
 * back, and writes the same bytes again. A broken promise aborts, which
 * libFuzzer reports as a crash and saves the input; ASan, UBSan and
 * LeakSanitizer catch the rest (memory errors, undefined behaviour, leaks).
 */
#ifndef SOAPFLOW_FUZZ_H
#define SOAPFLOW_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "soapflow/core.h"

/* libFuzzer's entry points (no header of its own declares them). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* What a harness returns for an input it does not pass to the reader: libFuzzer
 * then keeps it out of the corpus. */
#define FUZZ_REJECT (-1)

/* A promise broken: say which, and abort (libFuzzer saves the input). */
#define FUZZ_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* The input as the NUL-terminated text the JSON readers take (malloc'd), or
 * NULL when it holds a NUL byte: sf_read_file refuses such a file before any
 * reader sees it, so a reader never gets text that a NUL cuts short. */
static inline char *fuzz_text(const uint8_t *data, size_t size) {
    if (memchr(data, 0, size)) return NULL;
    char *t = malloc(size + 1);
    if (!t) abort();
    if (size) memcpy(t, data, size);
    t[size] = '\0';
    return t;
}

/* A failure as the reader reported it: a failing status, the same code in err,
 * and a message of one line that starts with the name of the input. */
static inline void fuzz_check_error(sf_status st, const sf_error *err, const char *origin) {
    FUZZ_CHECK(st < 0, "status %d", (int)st);
    FUZZ_CHECK(err->code == st, "status %d, err.code %d: \"%s\"", (int)st, (int)err->code,
               err->msg);
    FUZZ_CHECK(strncmp(err->msg, origin, strlen(origin)) == 0, "message does not name '%s': \"%s\"",
               origin, err->msg);
    FUZZ_CHECK(!strchr(err->msg, '\n'), "message of more than one line: \"%s\"", err->msg);
}

#endif

/*
 * arena.c - a chained bump allocator.
 *
 * Graphs, task graphs and parsed files are built once and freed at once, so a
 * bump allocator beats malloc per node in speed and in leak-proofness. Blocks
 * grow geometrically (capped) so that a large graph makes few system calls; an
 * allocation larger than a block gets a block of its own. Memory is zeroed.
 */
#include "soapflow/core.h"

#include <stdlib.h>
#include <string.h>

#define ARENA_ALIGN 16
#define ARENA_DEFAULT_BLOCK (64 * 1024)
#define ARENA_MAX_BLOCK (16 * 1024 * 1024)

typedef struct arena_block {
    struct arena_block *next;
    size_t cap, used;
    _Alignas(16) unsigned char data[];
} arena_block;

struct sf_arena {
    arena_block *head;
    size_t next_block;
    size_t total_used;
};

sf_arena *sf_arena_new(size_t block_bytes) {
    sf_arena *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->next_block = block_bytes ? block_bytes : ARENA_DEFAULT_BLOCK;
    return a;
}

static arena_block *arena_grow(sf_arena *a, size_t need) {
    size_t cap = a->next_block > need ? a->next_block : need;
    if (cap > SIZE_MAX - sizeof(arena_block)) return NULL;
    arena_block *b = malloc(sizeof *b + cap);
    if (!b) return NULL;
    b->cap = cap;
    b->used = 0;
    b->next = a->head;
    a->head = b;
    if (a->next_block < ARENA_MAX_BLOCK) a->next_block *= 2;
    return b;
}

void *sf_arena_alloc(sf_arena *a, size_t bytes) {
    if (!a) return NULL;
    if (bytes == 0) bytes = 1;
    if (bytes > SIZE_MAX - ARENA_ALIGN) return NULL;
    size_t rounded = (bytes + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    arena_block *b = a->head;
    if (!b || b->cap - b->used < rounded) {
        b = arena_grow(a, rounded);
        if (!b) return NULL;
    }
    void *p = b->data + b->used;
    b->used += rounded;
    a->total_used += rounded;
    memset(p, 0, rounded);
    return p;
}

void *sf_arena_calloc(sf_arena *a, size_t count, size_t size) {
    size_t bytes;
    if (sf_mul_overflow_size(count, size, &bytes)) return NULL;
    return sf_arena_alloc(a, bytes);
}

char *sf_arena_strdup(sf_arena *a, const char *s) {
    size_t n = strlen(s) + 1;
    char *p = sf_arena_alloc(a, n);
    if (p) memcpy(p, s, n);
    return p;
}

size_t sf_arena_used(const sf_arena *a) { return a ? a->total_used : 0; }

void sf_arena_free(sf_arena *a) {
    if (!a) return;
    arena_block *b = a->head;
    while (b) {
        arena_block *next = b->next;
        free(b);
        b = next;
    }
    free(a);
}

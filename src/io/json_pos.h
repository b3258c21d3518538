/*
 * json_pos.h - where a value sits in the raw text of a JSON document, for error
 * messages that name a line and a column (internal to src/io; see json_pos.c).
 *
 *     sf_json_step at[3] = {{"ops", 0}, {NULL, 12}, {"kernel", 0}};   // ops[12].kernel
 *     sf_json_pos p = sf_json_locate(text, len, at, 3);
 *     int line, col;
 *     sf_json_line_col(text, len, p.key, &line, &col);
 *
 * jansson keeps no positions of values, so the readers of the model and strategy
 * formats call this only when they have an error to report.
 */
#ifndef SOAPFLOW_IO_JSON_POS_H
#define SOAPFLOW_IO_JSON_POS_H

#include <stddef.h>

/* One step of a path into a document: an object member, or an array element
 * when key is NULL. */
typedef struct sf_json_step {
    const char *key; /* member name as jansson decodes it; NULL: array element */
    size_t index;    /* element index, when key is NULL */
} sf_json_step;

/* How far a path reached, and where. Offsets are in bytes from the start of the
 * text. */
typedef struct sf_json_pos {
    int depth;    /* steps of the path found, 0..n_path */
    size_t key;   /* start of the deepest step found: the opening quote of a member's
                     key, the first byte of an array element, or of the root value
                     when depth is 0 */
    size_t value; /* start of that step's value: after the member's ':' and any
                     blanks; the same as key for an element or the root */
} sf_json_pos;

/* Walk `path` (n_path steps; path may be NULL when n_path is 0) through the
 * text's first len bytes, stopping at the first step that is not there. Meant
 * for text jansson has already accepted, but any bytes at all give an answer
 * inside [0, len]: it never reads past len and always ends. */
sf_json_pos sf_json_locate(const char *text, size_t len, const sf_json_step *path, int n_path);

/* 1-based line and column of byte offset `off` (clamped to len). Columns count
 * characters, not bytes (UTF-8 continuation bytes do not advance them), as
 * jansson's syntax errors do, so both kinds of message agree. */
void sf_json_line_col(const char *text, size_t len, size_t off, int *line, int *col);

#endif

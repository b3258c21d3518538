/*
 * onnx_wire.c - why a file does not decode as an ONNX ModelProto.
 *
 * protobuf-c's unpacker answers a malformed message with NULL and nothing else.
 * A user needs more than "corrupt": where it breaks and in what. So when the
 * unpacker fails, this walks the same bytes by the wire format (varints, fixed
 * 32 and 64 bits, length-delimited runs) with a table of the ONNX messages and
 * their fields, and reports the first thing wrong: a field running past the end
 * of its message (truncation), a wire type the field cannot have, a varint of
 * more than ten bytes, field number 0, or a group (wire types 3 and 4, which
 * ONNX never uses and protobuf-c refuses). The message names the byte offset
 * and the path down to it ("graph > node #12 'conv1' > attribute 'pads'"); a
 * node's, tensor's or attribute's name is found by a shallow look at its fields
 * before it is walked, so that the node is named even when its name comes
 * after the break.
 *
 * Only what protobuf-c checks is checked (it is the decoder; this explains it):
 * unknown fields are skipped with any valid wire type, as it does; strings are
 * not checked for UTF-8. Depth is bounded (graphs nest in attributes), as is
 * the work: one pass over the bytes plus the shallow name looks.
 */
#include <stdio.h>
#include <string.h>

#include "onnx_impl.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_SGROUP = 3, WT_EGROUP = 4, WT_I32 = 5 };

typedef struct wmsg wmsg;
typedef struct wfield {
    int num;
    int wt;          /* the wire type of one element */
    const wmsg *sub; /* length-delimited message, or NULL */
    const char *name;
    int packable; /* a repeated scalar that may come packed (length-delimited) */
} wfield;

struct wmsg {
    const char *name;
    const wfield *fields;
    int n_fields;
    int name_field; /* the field holding the element's name, for messages; 0 none */
};

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define WMSG(var, nm, fl, namef) static const wmsg var = {nm, fl, N_OF(fl), namef}

/* Declared first: messages refer to each other. */
static const wmsg m_model, m_graph, m_node, m_attr, m_tensor, m_segment, m_value_info, m_type,
    m_type_tensor, m_type_seq, m_type_map, m_type_opt, m_shape, m_dim, m_opset, m_sse, m_training,
    m_function, m_sparse, m_annotation;

static const wfield f_sse[] = {{1, WT_LEN, NULL, "key", 0}, {2, WT_LEN, NULL, "value", 0}};
WMSG(m_sse, "entry", f_sse, 1);
static const wfield f_opset[] = {{1, WT_LEN, NULL, "domain", 0},
                                 {2, WT_VARINT, NULL, "version", 0}};
WMSG(m_opset, "opset_import", f_opset, 0);
static const wfield f_dim[] = {{1, WT_VARINT, NULL, "dim_value", 0},
                               {2, WT_LEN, NULL, "dim_param", 0},
                               {3, WT_LEN, NULL, "denotation", 0}};
WMSG(m_dim, "dim", f_dim, 0);
static const wfield f_shape[] = {{1, WT_LEN, &m_dim, "dim", 0}};
WMSG(m_shape, "shape", f_shape, 0);
static const wfield f_type_tensor[] = {{1, WT_VARINT, NULL, "elem_type", 0},
                                       {2, WT_LEN, &m_shape, "shape", 0}};
WMSG(m_type_tensor, "tensor_type", f_type_tensor, 0);
static const wfield f_type_seq[] = {{1, WT_LEN, &m_type, "elem_type", 0}};
WMSG(m_type_seq, "sequence_type", f_type_seq, 0);
static const wfield f_type_map[] = {{1, WT_VARINT, NULL, "key_type", 0},
                                    {2, WT_LEN, &m_type, "value_type", 0}};
WMSG(m_type_map, "map_type", f_type_map, 0);
static const wfield f_type_opt[] = {{1, WT_LEN, &m_type, "elem_type", 0}};
WMSG(m_type_opt, "optional_type", f_type_opt, 0);
static const wfield f_type[] = {{1, WT_LEN, &m_type_tensor, "tensor_type", 0},
                                {4, WT_LEN, &m_type_seq, "sequence_type", 0},
                                {5, WT_LEN, &m_type_map, "map_type", 0},
                                {6, WT_LEN, NULL, "denotation", 0},
                                {8, WT_LEN, &m_type_tensor, "sparse_tensor_type", 0},
                                {9, WT_LEN, &m_type_opt, "optional_type", 0}};
WMSG(m_type, "type", f_type, 0);
static const wfield f_value_info[] = {{1, WT_LEN, NULL, "name", 0},
                                      {2, WT_LEN, &m_type, "type", 0},
                                      {3, WT_LEN, NULL, "doc_string", 0}};
WMSG(m_value_info, "value", f_value_info, 1);
static const wfield f_segment[] = {{1, WT_VARINT, NULL, "begin", 0},
                                   {2, WT_VARINT, NULL, "end", 0}};
WMSG(m_segment, "segment", f_segment, 0);
static const wfield f_tensor[] = {
    {1, WT_VARINT, NULL, "dims", 1},          {2, WT_VARINT, NULL, "data_type", 0},
    {3, WT_LEN, &m_segment, "segment", 0},    {4, WT_I32, NULL, "float_data", 1},
    {5, WT_VARINT, NULL, "int32_data", 1},    {6, WT_LEN, NULL, "string_data", 0},
    {7, WT_VARINT, NULL, "int64_data", 1},    {8, WT_LEN, NULL, "name", 0},
    {9, WT_LEN, NULL, "raw_data", 0},         {10, WT_I64, NULL, "double_data", 1},
    {11, WT_VARINT, NULL, "uint64_data", 1},  {12, WT_LEN, NULL, "doc_string", 0},
    {13, WT_LEN, &m_sse, "external_data", 0}, {14, WT_VARINT, NULL, "data_location", 0}};
WMSG(m_tensor, "tensor", f_tensor, 8);
static const wfield f_sparse[] = {{1, WT_LEN, &m_tensor, "values", 0},
                                  {2, WT_LEN, &m_tensor, "indices", 0},
                                  {3, WT_VARINT, NULL, "dims", 1}};
WMSG(m_sparse, "sparse tensor", f_sparse, 0);
static const wfield f_attr[] = {{1, WT_LEN, NULL, "name", 0},
                                {2, WT_I32, NULL, "f", 0},
                                {3, WT_VARINT, NULL, "i", 0},
                                {4, WT_LEN, NULL, "s", 0},
                                {5, WT_LEN, &m_tensor, "t", 0},
                                {6, WT_LEN, &m_graph, "g", 0},
                                {7, WT_I32, NULL, "floats", 1},
                                {8, WT_VARINT, NULL, "ints", 1},
                                {9, WT_LEN, NULL, "strings", 0},
                                {10, WT_LEN, &m_tensor, "tensors", 0},
                                {11, WT_LEN, &m_graph, "graphs", 0},
                                {13, WT_LEN, NULL, "doc_string", 0},
                                {14, WT_LEN, &m_type, "tp", 0},
                                {15, WT_LEN, &m_type, "type_protos", 0},
                                {20, WT_VARINT, NULL, "type", 0},
                                {21, WT_LEN, NULL, "ref_attr_name", 0},
                                {22, WT_LEN, &m_sparse, "sparse_tensor", 0},
                                {23, WT_LEN, &m_sparse, "sparse_tensors", 0}};
WMSG(m_attr, "attribute", f_attr, 1);
static const wfield f_node[] = {
    {1, WT_LEN, NULL, "input", 0},        {2, WT_LEN, NULL, "output", 0},
    {3, WT_LEN, NULL, "name", 0},         {4, WT_LEN, NULL, "op_type", 0},
    {5, WT_LEN, &m_attr, "attribute", 0}, {6, WT_LEN, NULL, "doc_string", 0},
    {7, WT_LEN, NULL, "domain", 0}};
WMSG(m_node, "node", f_node, 3);
static const wfield f_annotation[] = {{1, WT_LEN, NULL, "tensor_name", 0},
                                      {2, WT_LEN, &m_sse, "quant_parameter_tensor_names", 0}};
WMSG(m_annotation, "quantization_annotation", f_annotation, 0);
static const wfield f_graph[] = {{1, WT_LEN, &m_node, "node", 0},
                                 {2, WT_LEN, NULL, "name", 0},
                                 {5, WT_LEN, &m_tensor, "initializer", 0},
                                 {10, WT_LEN, NULL, "doc_string", 0},
                                 {11, WT_LEN, &m_value_info, "input", 0},
                                 {12, WT_LEN, &m_value_info, "output", 0},
                                 {13, WT_LEN, &m_value_info, "value_info", 0},
                                 {14, WT_LEN, &m_annotation, "quantization_annotation", 0},
                                 {15, WT_LEN, &m_sparse, "sparse_initializer", 0}};
WMSG(m_graph, "graph", f_graph, 0);
static const wfield f_training[] = {{1, WT_LEN, &m_graph, "initialization", 0},
                                    {2, WT_LEN, &m_graph, "algorithm", 0},
                                    {3, WT_LEN, &m_sse, "initialization_binding", 0},
                                    {4, WT_LEN, &m_sse, "update_binding", 0}};
WMSG(m_training, "training_info", f_training, 0);
static const wfield f_function[] = {{1, WT_LEN, NULL, "name", 0},
                                    {4, WT_LEN, NULL, "input", 0},
                                    {5, WT_LEN, NULL, "output", 0},
                                    {6, WT_LEN, NULL, "attribute", 0},
                                    {7, WT_LEN, &m_node, "node", 0},
                                    {8, WT_LEN, NULL, "doc_string", 0},
                                    {9, WT_LEN, &m_opset, "opset_import", 0},
                                    {10, WT_LEN, NULL, "domain", 0},
                                    {11, WT_LEN, &m_attr, "attribute_proto", 0}};
WMSG(m_function, "function", f_function, 1);
static const wfield f_model[] = {
    {1, WT_VARINT, NULL, "ir_version", 0},     {2, WT_LEN, NULL, "producer_name", 0},
    {3, WT_LEN, NULL, "producer_version", 0},  {4, WT_LEN, NULL, "domain", 0},
    {5, WT_VARINT, NULL, "model_version", 0},  {6, WT_LEN, NULL, "doc_string", 0},
    {7, WT_LEN, &m_graph, "graph", 0},         {8, WT_LEN, &m_opset, "opset_import", 0},
    {14, WT_LEN, &m_sse, "metadata_props", 0}, {20, WT_LEN, &m_training, "training_info", 0},
    {25, WT_LEN, &m_function, "functions", 0}};
WMSG(m_model, "model", f_model, 0);

#define MAX_DEPTH 32
#define PATH_MAX_LEN 400

typedef struct walker {
    const uint8_t *buf;
    size_t len;
    char path[PATH_MAX_LEN]; /* "graph > node #12 'conv1' > attribute 'pads'" */
    char msg[SF_ERRMSG_MAX];
    size_t at; /* byte offset of the problem */
    int depth;
} walker;

/* A varint at *p (< end); 0 and the value, -1 truncated, -2 longer than 10 bytes. */
static int get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    uint64_t r = 0;
    for (int shift = 0, k = 0; k < 10; k++, shift += 7) {
        if (*p >= end) return -1;
        uint8_t b = *(*p)++;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return 0;
        }
    }
    return -2;
}

static const char *wt_name(int wt) {
    switch (wt) {
    case WT_VARINT: return "varint";
    case WT_I64: return "64-bit";
    case WT_LEN: return "length-delimited";
    case WT_SGROUP: return "start-group";
    case WT_EGROUP: return "end-group";
    case WT_I32: return "32-bit";
    default: return "invalid";
    }
}

static const wfield *find_field(const wmsg *m, int num) {
    for (int i = 0; i < m->n_fields; i++)
        if (m->fields[i].num == num) return &m->fields[i];
    return NULL;
}

static int fail(walker *w, size_t at, const char *fmt, ...) SF_PRINTF(3, 4);
static int fail(walker *w, size_t at, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg, sizeof w->msg, fmt, ap);
    va_end(ap);
    w->at = at;
    return -1;
}

/* Skip one element of wire type wt at *p; -1 (w set) when malformed. */
static int skip_value(walker *w, const uint8_t **p, const uint8_t *end, int wt, int num,
                      const char *fname) {
    size_t at = (size_t)(*p - w->buf);
    uint64_t v;
    int r;
    switch (wt) {
    case WT_VARINT:
        r = get_varint(p, end, &v);
        if (r == -1) return fail(w, at, "field %d (%s): varint cut off by the end", num, fname);
        if (r == -2) return fail(w, at, "field %d (%s): varint longer than 10 bytes", num, fname);
        return 0;
    case WT_I64:
    case WT_I32: {
        size_t n = wt == WT_I64 ? 8 : 4;
        if ((size_t)(end - *p) < n)
            return fail(w, at, "field %d (%s): %zu-byte value but %zu bytes left", num, fname, n,
                        (size_t)(end - *p));
        *p += n;
        return 0;
    }
    default: return fail(w, at, "field %d: wire type %d", num, wt);
    }
}

/* A shallow look for the name field (a string) of a message in [p, end). */
static void peek_name(const uint8_t *p, const uint8_t *end, int name_field, char *out, size_t cap) {
    out[0] = '\0';
    while (p < end) {
        uint64_t key, v;
        if (get_varint(&p, end, &key) != 0) return;
        int wt = (int)(key & 7);
        uint64_t num = key >> 3;
        if (wt == WT_VARINT) {
            if (get_varint(&p, end, &v) != 0) return;
        } else if (wt == WT_I64 || wt == WT_I32) {
            size_t n = wt == WT_I64 ? 8 : 4;
            if ((size_t)(end - p) < n) return;
            p += n;
        } else if (wt == WT_LEN) {
            if (get_varint(&p, end, &v) != 0 || v > (uint64_t)(end - p)) return;
            if (num == (uint64_t)name_field) {
                size_t n = (size_t)v < cap - 1 ? (size_t)v : cap - 1;
                for (size_t i = 0; i < n; i++) /* printable, one line */
                    out[i] = p[i] >= 0x20 && p[i] < 0x7f ? (char)p[i] : '?';
                out[n] = '\0';
                return;
            }
            p += v;
        } else {
            return;
        }
    }
}

static int walk(walker *w, const wmsg *m, const uint8_t *p, const uint8_t *end);

/* Append "node #12 'name'" (field f, element idx, named from [p, end)) to the path. */
static void push_step(walker *w, const wfield *f, long idx, const uint8_t *p, const uint8_t *end) {
    size_t keep = strlen(w->path);
    char name[80];
    name[0] = '\0';
    if (f->sub->name_field) peek_name(p, end, f->sub->name_field, name, sizeof name);
    char step[160];
    if (idx >= 0 && name[0])
        snprintf(step, sizeof step, "%s #%ld '%s'", f->name, idx, name);
    else if (idx >= 0)
        snprintf(step, sizeof step, "%s #%ld", f->name, idx);
    else if (name[0])
        snprintf(step, sizeof step, "%s '%s'", f->name, name);
    else
        snprintf(step, sizeof step, "%s", f->name);
    snprintf(w->path + keep, sizeof w->path - keep, "%s%s", keep ? " > " : "", step);
}

/* Walk one length-delimited element (a sub-message) of field f, index idx. */
static int walk_sub(walker *w, const wfield *f, long idx, const uint8_t *p, const uint8_t *end) {
    size_t keep = strlen(w->path);
    push_step(w, f, idx, p, end);
    if (++w->depth > MAX_DEPTH)
        return fail(w, (size_t)(p - w->buf), "messages nested more than %d deep", MAX_DEPTH);
    int r = walk(w, f->sub, p, end);
    w->depth--;
    if (r == 0) w->path[keep] = '\0';
    return r;
}

static int walk(walker *w, const wmsg *m, const uint8_t *p, const uint8_t *end) {
    long counts[32] = {0}; /* element index per field (by position in the table) */
    while (p < end) {
        size_t at = (size_t)(p - w->buf);
        uint64_t key;
        int r = get_varint(&p, end, &key);
        if (r == -1) return fail(w, at, "a field key cut off by the end");
        if (r == -2) return fail(w, at, "a field key longer than 10 bytes");
        int wt = (int)(key & 7);
        uint64_t num64 = key >> 3;
        if (num64 == 0) return fail(w, at, "field number 0 (not a protobuf field)");
        if (num64 > 536870911u)
            return fail(w, at, "field number %llu out of range", (unsigned long long)num64);
        int num = (int)num64;
        const wfield *f = find_field(m, num);
        const char *fname = f ? f->name : "unknown";
        if (wt == WT_SGROUP || wt == WT_EGROUP)
            return fail(w, at, "field %d (%s) uses wire type %d (%s), which ONNX never uses", num,
                        fname, wt, wt_name(wt));
        if (wt == 6 || wt == 7) return fail(w, at, "field %d: invalid wire type %d", num, wt);
        if (f && wt != f->wt && !(f->packable && wt == WT_LEN))
            return fail(w, at, "field %d (%s) has wire type %d (%s), expected %d (%s)", num, fname,
                        wt, wt_name(wt), f->wt, wt_name(f->wt));
        if (wt != WT_LEN) {
            if (skip_value(w, &p, end, wt, num, fname) != 0) return -1;
            continue;
        }
        size_t lat = (size_t)(p - w->buf);
        uint64_t n;
        r = get_varint(&p, end, &n);
        if (r == -1) return fail(w, lat, "field %d (%s): length cut off by the end", num, fname);
        if (r == -2) return fail(w, lat, "field %d (%s): length longer than 10 bytes", num, fname);
        long idx = -1;
        if (f && f->sub) {
            int pos = (int)(f - m->fields);
            /* repeated message fields get their index: node #k, initializer #k */
            if (f->sub == &m_node || f->sub == &m_tensor || f->sub == &m_value_info ||
                f->sub == &m_attr || f->sub == &m_opset || f->sub == &m_dim)
                idx = pos < 32 ? counts[pos]++ : -1;
        }
        if (n > (uint64_t)(end - p)) {
            if (f && f->sub) {
                /* the element is cut: walk what is left of it, to find the innermost
                 * element the cut goes through (a node, its attribute) */
                push_step(w, f, idx, p, end);
                if (++w->depth > MAX_DEPTH)
                    return fail(w, at, "messages nested more than %d deep", MAX_DEPTH);
                if (walk(w, f->sub, p, end) != 0) return -1;
                w->depth--;
            }
            return fail(w, at,
                        "field %d (%s) is %llu bytes long but only %zu are left (the "
                        "file is truncated or corrupt)",
                        num, fname, (unsigned long long)n, (size_t)(end - p));
        }
        const uint8_t *sub_end = p + n;
        if (f && f->sub) {
            if (walk_sub(w, f, idx, p, sub_end) != 0) return -1;
        } else if (f && f->packable) {
            /* a packed run of scalars */
            const uint8_t *q = p;
            while (q < sub_end)
                if (skip_value(w, &q, sub_end, f->wt, num, fname) != 0) return -1;
        }
        p = sub_end;
    }
    return 0;
}

sf_status ox_wire_check(const uint8_t *buf, size_t len, const char *origin, sf_error *err) {
    walker w;
    memset(&w, 0, sizeof w);
    w.buf = buf;
    w.len = len;
    if (walk(&w, &m_model, buf, buf + len) == 0) return SF_OK;
    if (w.path[0])
        return sf_error_set(err, SF_ERR_PARSE, "%s: not a valid ONNX model: at byte %zu, in %s: %s",
                            origin, w.at, w.path, w.msg);
    return sf_error_set(err, SF_ERR_PARSE, "%s: not a valid ONNX model: at byte %zu: %s", origin,
                        w.at, w.msg);
}

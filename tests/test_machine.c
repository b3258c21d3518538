/* Machine: presets, link counts, routes (lengths, types, connectivity), transfer
 * times, subsets, validation, JSON round trips and every JSON error path. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "soapflow/io.h"
#include "soapflow/machine.h"

#define assert_close(a, b) assert_true(fabs((a) - (b)) <= 1e-12 * fmax(1.0, fabs(b)))
#define assert_contains(s, sub)                                                                    \
    do {                                                                                           \
        if (!strstr((s), (sub))) fail_msg("'%s' does not contain '%s'", (s), (sub));              \
    } while (0)

static char tmpdir[64];

static int setup(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sf_test_machine_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static sf_machine *preset(const char *name) {
    sf_error err = {0};
    sf_machine *m = sf_machine_preset(name, &err);
    if (!m) fail_msg("preset %s: %s", name, err.msg);
    return m;
}

/* Link `id`, which must exist. */
static sf_link link_of(const sf_machine *m, int id) {
    sf_link l;
    if (!sf_machine_link(m, id, &l)) fail_msg("%s: no link %d", sf_machine_name(m), id);
    return l;
}

static const char *link_name(const sf_machine *m, int id, char buf[SF_LINK_NAME_MAX]) {
    if (!sf_machine_link_name(m, id, buf, SF_LINK_NAME_MAX))
        fail_msg("%s: no link %d", sf_machine_name(m), id);
    return buf;
}

static void test_names(void **state) {
    (void)state;
    assert_string_equal(sf_dtype_name(SF_DTYPE_BF16), "bf16");
    assert_string_equal(sf_dtype_name(SF_DTYPE_COUNT), "unknown");
    assert_string_equal(sf_link_type_name(SF_LINK_NIC_IN), "nic_in");
    assert_string_equal(sf_link_type_name((sf_link_type)-1), "unknown");
    assert_string_equal(sf_intra_topology_name(SF_INTRA_PCIE_TREE), "pcie_tree");
    for (int t = 0; t < SF_LINK_TYPE_COUNT; t++)
        assert_string_not_equal(sf_link_type_name((sf_link_type)t), "unknown");
}

/* Links per node: intra (PAIRWISE/SHM D(D-1), SWITCH 2D, PCIE_TREE 2D + 2D/G) + 2 per NIC. */
static void test_presets_build(void **state) {
    (void)state;
    static const struct {
        const char *name;
        int nodes, devices, links;
    } want[] = {
        {"p100-4x4", 4, 16, 4 * (4 * 3 + 2)},
        {"k80-16x4", 16, 64, 16 * (2 * 4 + 2 * 2 + 2)},
        {"dgx-1v", 4, 32, 4 * (8 * 7 + 2 * 4)},
        {"dgx-a100", 8, 64, 8 * (2 * 8 + 2 * 8)},
        {"dgx-h100", 8, 64, 8 * (2 * 8 + 2 * 8)},
        {"cpu", 1, 4, 4 * 3 + 2},
    };
    assert_int_equal(sf_machine_preset_count(), 6);
    assert_null(sf_machine_preset_name(6));
    assert_null(sf_machine_preset_summary(-1));
    for (int p = 0; p < 6; p++) {
        assert_string_equal(sf_machine_preset_name(p), want[p].name);
        assert_true(strlen(sf_machine_preset_summary(p)) > 10);
        sf_machine *m = preset(want[p].name);
        assert_string_equal(sf_machine_name(m), want[p].name);
        assert_int_equal(sf_machine_num_nodes(m), want[p].nodes);
        assert_int_equal(sf_machine_num_devices(m), want[p].devices);
        assert_int_equal(sf_machine_num_links(m), want[p].links);
        assert_null(sf_machine_device(m, want[p].devices));
        sf_link none;
        char nb[SF_LINK_NAME_MAX];
        assert_null(sf_machine_link(m, -1, &none));
        assert_null(sf_machine_link(m, want[p].links, &none));
        assert_null(sf_machine_link_name(m, want[p].links, nb, sizeof nb));
        assert_string_equal(nb, "");
        int dpn = want[p].devices / want[p].nodes;
        for (int d = 0; d < want[p].devices; d++) {
            const sf_device *dev = sf_machine_device(m, d);
            assert_int_equal(dev->id, d);
            assert_int_equal(dev->node, d / dpn);
            assert_int_equal(dev->local, d % dpn);
            assert_true(sf_machine_device_kind(m, d)->peak_flops[SF_DTYPE_FP32] > 0);
        }
        for (int l = 0; l < want[p].links; l++) {
            sf_link k = link_of(m, l);
            assert_int_equal(k.id, l);
            assert_true(k.bandwidth_Bps > 0 && k.latency_s >= 0);
            assert_int_equal(k.inter_node, k.type == SF_LINK_NIC_OUT || k.type == SF_LINK_NIC_IN);
            assert_true(k.node >= 0 && k.node < want[p].nodes);
            assert_true(strlen(link_name(m, l, nb)) > 0);
        }
        sf_machine_free(m);
    }
}

static void expect_route(const sf_machine *m, int a, int b, int n, const sf_link_type *types) {
    sf_route r;
    sf_machine_route(m, a, b, &r);
    if (r.n_links != n) fail_msg("%s %d->%d: %d links, want %d", sf_machine_name(m), a, b,
                                 r.n_links, n);
    for (int i = 0; i < n; i++) assert_int_equal(link_of(m, r.links[i]).type, types[i]);
}

static void test_route_shapes(void **state) {
    (void)state;
    sf_machine *m = preset("p100-4x4");
    expect_route(m, 0, 1, 1, (sf_link_type[]){SF_LINK_NVLINK});
    expect_route(m, 3, 2, 1, (sf_link_type[]){SF_LINK_NVLINK});
    expect_route(m, 0, 5, 2, (sf_link_type[]){SF_LINK_NIC_OUT, SF_LINK_NIC_IN});
    expect_route(m, 7, 7, 0, NULL);
    sf_route r;
    sf_machine_route(m, 0, 5, &r);
    assert_int_equal(link_of(m, r.links[0]).node, 0);
    assert_int_equal(link_of(m, r.links[1]).node, 1);
    sf_machine_route(m, 0, 99, &r); /* no such device */
    assert_int_equal(r.n_links, 0);
    sf_machine_free(m);

    m = preset("k80-16x4");
    expect_route(m, 0, 1, 2, (sf_link_type[]){SF_LINK_SWITCH_UP, SF_LINK_SWITCH_DOWN});
    expect_route(m, 2, 3, 2, (sf_link_type[]){SF_LINK_SWITCH_UP, SF_LINK_SWITCH_DOWN});
    expect_route(m, 1, 2, 4,
                 (sf_link_type[]){SF_LINK_SWITCH_UP, SF_LINK_PCIE_UP, SF_LINK_PCIE_DOWN,
                                  SF_LINK_SWITCH_DOWN});
    expect_route(m, 0, 4, 6,
                 (sf_link_type[]){SF_LINK_SWITCH_UP, SF_LINK_PCIE_UP, SF_LINK_NIC_OUT,
                                  SF_LINK_NIC_IN, SF_LINK_PCIE_DOWN, SF_LINK_SWITCH_DOWN});
    sf_machine_free(m);

    m = preset("dgx-a100");
    expect_route(m, 0, 7, 2, (sf_link_type[]){SF_LINK_SWITCH_UP, SF_LINK_SWITCH_DOWN});
    expect_route(m, 3, 13, 2, (sf_link_type[]){SF_LINK_NIC_OUT, SF_LINK_NIC_IN});
    sf_machine_route(m, 3, 13, &r); /* device local 3 uses NIC 3; local 5 of node 1 NIC 5 */
    char nb[SF_LINK_NAME_MAX];
    assert_string_equal(link_name(m, r.links[0], nb), "n0.nic3.out");
    assert_string_equal(link_name(m, r.links[1], nb), "n1.nic5.in");
    sf_machine_free(m);

    m = preset("dgx-h100");
    expect_route(m, 8, 15, 2, (sf_link_type[]){SF_LINK_SWITCH_UP, SF_LINK_SWITCH_DOWN});
    sf_machine_free(m);

    m = preset("cpu");
    expect_route(m, 0, 3, 1, (sf_link_type[]){SF_LINK_SHM});
    sf_machine_free(m);
}

/* Split a link into the places it joins. Intra links are named "from->to";
 * NIC links "nK.nicI.out"/"nK.nicI.in" join the NIC to the network "net". */
static void link_ends(const sf_machine *m, const sf_link *l, char *from, char *to) {
    char name[SF_LINK_NAME_MAX];
    link_name(m, l->id, name);
    const char *arrow = strstr(name, "->");
    if (arrow) {
        snprintf(from, 64, "%.*s", (int)(arrow - name), name);
        snprintf(to, 64, "%s", arrow + 2);
        return;
    }
    assert_true(l->inter_node);
    char nic[64];
    snprintf(nic, sizeof nic, "%s", name);
    *strrchr(nic, '.') = '\0';
    snprintf(from, 64, "%s", l->type == SF_LINK_NIC_OUT ? nic : "net");
    snprintf(to, 64, "%s", l->type == SF_LINK_NIC_OUT ? "net" : nic);
}

/* Node of a place name "nK...." (-1 for the network). */
static int place_node(const char *place) {
    return place[0] == 'n' && place[1] != 'e' ? atoi(place + 1) : -1;
}

/* Every route of every preset is a walk from a to b: each link starts where
 * the last ended, except that a device or host root may hand data to a NIC of
 * its own node (GPUDirect, or the host's NIC) and take it from one. */
static void check_routes(const sf_machine *m) {
    int n = sf_machine_num_devices(m), nl = sf_machine_num_links(m);
    int dpn = n / sf_machine_num_nodes(m);
    int pcie = sf_machine_get_desc(m)->intra == SF_INTRA_PCIE_TREE;
    int nics = sf_machine_get_desc(m)->nics_per_node;
    char *used = calloc((size_t)nl, 1);
    assert_non_null(used);
    for (int a = 0; a < n; a++) {
        for (int b = 0; b < n; b++) {
            sf_route r;
            sf_machine_route(m, a, b, &r);
            if (a == b) {
                assert_int_equal(r.n_links, 0);
                continue;
            }
            assert_true(r.n_links >= 1 && r.n_links <= SF_MAX_ROUTE);
            char here[64], from[64], to[64];
            snprintf(here, sizeof here, "n%d.d%d", a / dpn, a % dpn);
            for (int i = 0; i < r.n_links; i++) {
                sf_link lb;
                const sf_link *l = sf_machine_link(m, r.links[i], &lb);
                assert_non_null(l);
                used[l->id] = 1;
                for (int k = 0; k < i; k++) assert_int_not_equal(r.links[k], r.links[i]);
                link_ends(m, l, from, to);
                if (strcmp(here, from) != 0) {
                    /* Handing over to a NIC: from the device itself or, on a
                     * PCIe tree, from the host root; always in the same node. */
                    assert_int_equal(l->type, SF_LINK_NIC_OUT);
                    assert_int_equal(place_node(here), l->node);
                    assert_true(pcie ? strstr(here, ".root") != NULL : strstr(here, ".d") != NULL);
                    assert_int_equal(place_node(here), a / dpn);
                    char want_nic[32];
                    snprintf(want_nic, sizeof want_nic, "n%d.nic%d", a / dpn, (a % dpn) % nics);
                    assert_string_equal(from, want_nic);
                }
                if (l->type == SF_LINK_NIC_IN) {
                    char want_nic[32];
                    snprintf(want_nic, sizeof want_nic, "n%d.nic%d", b / dpn, (b % dpn) % nics);
                    assert_string_equal(to, want_nic);
                    /* The NIC delivers to the host root (PCIe) or the device. */
                    if (pcie)
                        snprintf(to, 64, "n%d.root", b / dpn);
                    else
                        snprintf(to, 64, "n%d.d%d", b / dpn, b % dpn);
                }
                if (l->src_dev >= 0) assert_int_equal(l->src_dev, i == 0 ? a : -2);
                if (l->dst_dev >= 0) assert_int_equal(l->dst_dev, i == r.n_links - 1 ? b : -2);
                assert_int_equal(l->inter_node, a / dpn != b / dpn && (l->type == SF_LINK_NIC_OUT ||
                                                                       l->type == SF_LINK_NIC_IN));
                snprintf(here, sizeof here, "%s", to);
            }
            char want_end[32];
            snprintf(want_end, sizeof want_end, "n%d.d%d", b / dpn, b % dpn);
            assert_string_equal(here, want_end);
            assert_true(sf_machine_transfer_time_s(m, a, b, 1e6) > 0);
        }
    }
    /* No dead links: every link carries some route when there is a network. */
    if (sf_machine_num_nodes(m) > 1)
        for (int l = 0; l < nl; l++)
            if (!used[l]) {
                char nb[SF_LINK_NAME_MAX];
                fail_msg("%s: link %s is on no route", sf_machine_name(m), link_name(m, l, nb));
            }
    free(used);
}

static void test_route_connectivity(void **state) {
    (void)state;
    for (int p = 0; p < sf_machine_preset_count(); p++) {
        sf_machine *m = preset(sf_machine_preset_name(p));
        check_routes(m);
        sf_machine_free(m);
    }
}

/* ---- the explicit representation, as the machine once stored it ----------- */

/* A link as the machine stored it before links and routes became rules: every
 * link enumerated in the documented order (machine.c: node by node, a node's
 * intra links, then its NICs out and in), named by hand, and every route put
 * together from link names by the rule docs/formats-machine.md states. The
 * machine must give the same records, names and routes, computed from ids. */
typedef struct ref_link {
    sf_link l;
    char name[SF_LINK_NAME_MAX];
} ref_link;

typedef struct ref_machine {
    ref_link *links;
    int n, cap;
    int *by_name; /* link indices sorted by name */
} ref_machine;

static void ref_add(ref_machine *r, const sf_machine_desc *d, sf_link_type type, int node, int src,
                    int dst, const char *fmt, ...) SF_PRINTF(7, 8);

static void ref_add(ref_machine *r, const sf_machine_desc *d, sf_link_type type, int node, int src,
                    int dst, const char *fmt, ...) {
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 64;
        r->links = realloc(r->links, (size_t)r->cap * sizeof *r->links);
        assert_non_null(r->links);
    }
    ref_link *x = &r->links[r->n];
    memset(x, 0, sizeof *x);
    x->l.id = r->n++;
    x->l.type = type;
    x->l.node = node;
    x->l.src_dev = src;
    x->l.dst_dev = dst;
    x->l.inter_node = type == SF_LINK_NIC_OUT || type == SF_LINK_NIC_IN;
    if (x->l.inter_node)
        x->l.bandwidth_Bps = d->inter_bw_Bps;
    else if (type == SF_LINK_PCIE_UP || type == SF_LINK_PCIE_DOWN)
        x->l.bandwidth_Bps = d->pcie_up_bw_Bps;
    else
        x->l.bandwidth_Bps = d->intra_bw_Bps;
    x->l.latency_s = x->l.inter_node ? d->inter_latency_s : d->intra_latency_s;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->name, sizeof x->name, fmt, ap);
    va_end(ap);
}

static const ref_machine *ref_sorting; /* qsort has no context argument */
static int ref_cmp(const void *a, const void *b) {
    return strcmp(ref_sorting->links[*(const int *)a].name,
                  ref_sorting->links[*(const int *)b].name);
}

static void ref_build(ref_machine *r, const sf_machine_desc *d) {
    memset(r, 0, sizeof *r);
    int D = d->devices_per_node, G = d->intra == SF_INTRA_PCIE_TREE ? d->pcie_group : D;
    for (int n = 0; n < d->nodes; n++) {
        int g0 = n * D;
        switch (d->intra) {
        case SF_INTRA_PAIRWISE:
        case SF_INTRA_SHM:
            for (int i = 0; i < D; i++)
                for (int j = 0; j < D; j++)
                    if (i != j)
                        ref_add(r, d, d->intra == SF_INTRA_SHM ? SF_LINK_SHM : SF_LINK_NVLINK, n,
                                g0 + i, g0 + j, "n%d.d%d->n%d.d%d", n, i, n, j);
            break;
        case SF_INTRA_SWITCH:
        case SF_INTRA_PCIE_TREE:
            for (int i = 0; i < D; i++) {
                ref_add(r, d, SF_LINK_SWITCH_UP, n, g0 + i, -1, "n%d.d%d->n%d.sw%d", n, i, n,
                        i / G);
                ref_add(r, d, SF_LINK_SWITCH_DOWN, n, -1, g0 + i, "n%d.sw%d->n%d.d%d", n, i / G, n,
                        i);
            }
            if (d->intra == SF_INTRA_PCIE_TREE)
                for (int s = 0; s < D / G; s++) {
                    ref_add(r, d, SF_LINK_PCIE_UP, n, -1, -1, "n%d.sw%d->n%d.root", n, s, n);
                    ref_add(r, d, SF_LINK_PCIE_DOWN, n, -1, -1, "n%d.root->n%d.sw%d", n, n, s);
                }
            break;
        case SF_INTRA_COUNT: fail_msg("bad topology");
        }
        for (int k = 0; k < d->nics_per_node; k++) {
            ref_add(r, d, SF_LINK_NIC_OUT, n, -1, -1, "n%d.nic%d.out", n, k);
            ref_add(r, d, SF_LINK_NIC_IN, n, -1, -1, "n%d.nic%d.in", n, k);
        }
    }
    r->by_name = malloc((size_t)(r->n ? r->n : 1) * sizeof *r->by_name);
    assert_non_null(r->by_name);
    for (int i = 0; i < r->n; i++) r->by_name[i] = i;
    ref_sorting = r;
    qsort(r->by_name, (size_t)r->n, sizeof *r->by_name, ref_cmp);
}

static void ref_free(ref_machine *r) {
    free(r->links);
    free(r->by_name);
}

/* Push the link of that name onto the route. */
static void ref_hop(const ref_machine *r, sf_route *rt, const char *fmt, ...) SF_PRINTF(3, 4);

static void ref_hop(const ref_machine *r, sf_route *rt, const char *fmt, ...) {
    char name[SF_LINK_NAME_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    int lo = 0, hi = r->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(r->links[r->by_name[mid]].name, name);
        if (c == 0) {
            assert_true(rt->n_links < SF_MAX_ROUTE);
            rt->links[rt->n_links++] = r->by_name[mid];
            return;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    fail_msg("no link named %s", name);
}

/* The documented route from a to b (docs/formats-machine.md), by link names. */
static void ref_route(const ref_machine *r, const sf_machine_desc *d, int a, int b, sf_route *rt) {
    int D = d->devices_per_node, K = d->nics_per_node;
    int na = a / D, i = a % D, nb = b / D, j = b % D;
    int pcie = d->intra == SF_INTRA_PCIE_TREE, G = pcie ? d->pcie_group : D;
    rt->n_links = 0;
    if (a == b) return;
    if (na == nb && (d->intra == SF_INTRA_PAIRWISE || d->intra == SF_INTRA_SHM)) {
        ref_hop(r, rt, "n%d.d%d->n%d.d%d", na, i, na, j);
        return;
    }
    if (na == nb) {
        ref_hop(r, rt, "n%d.d%d->n%d.sw%d", na, i, na, i / G);
        if (i / G != j / G) {
            ref_hop(r, rt, "n%d.sw%d->n%d.root", na, i / G, na);
            ref_hop(r, rt, "n%d.root->n%d.sw%d", na, na, j / G);
        }
        ref_hop(r, rt, "n%d.sw%d->n%d.d%d", na, j / G, na, j);
        return;
    }
    if (pcie) {
        ref_hop(r, rt, "n%d.d%d->n%d.sw%d", na, i, na, i / G);
        ref_hop(r, rt, "n%d.sw%d->n%d.root", na, i / G, na);
    }
    ref_hop(r, rt, "n%d.nic%d.out", na, i % K);
    ref_hop(r, rt, "n%d.nic%d.in", nb, j % K);
    if (pcie) {
        ref_hop(r, rt, "n%d.root->n%d.sw%d", nb, nb, j / G);
        ref_hop(r, rt, "n%d.sw%d->n%d.d%d", nb, j / G, nb, j);
    }
}

static void check_against_ref(const sf_machine_desc *d) {
    sf_error err = {0};
    sf_machine *m = sf_machine_build(d, &err);
    if (!m) fail_msg("%s: %s", d->name, err.msg);
    ref_machine r;
    ref_build(&r, d);
    assert_int_equal(sf_machine_num_links(m), r.n);
    for (int id = 0; id < r.n; id++) {
        sf_link l = link_of(m, id);
        const sf_link *w = &r.links[id].l;
        char nb[SF_LINK_NAME_MAX];
        if (strcmp(link_name(m, id, nb), r.links[id].name) != 0)
            fail_msg("%s link %d: named %s, want %s", d->name, id, nb, r.links[id].name);
        assert_int_equal(l.id, w->id);
        assert_int_equal(l.type, w->type);
        assert_int_equal(l.node, w->node);
        assert_int_equal(l.src_dev, w->src_dev);
        assert_int_equal(l.dst_dev, w->dst_dev);
        assert_int_equal(l.inter_node, w->inter_node);
        assert_true(l.bandwidth_Bps == w->bandwidth_Bps);
        assert_true(l.latency_s == w->latency_s);
    }
    int n = sf_machine_num_devices(m);
    for (int a = 0; a < n; a++) {
        for (int b = 0; b < n; b++) {
            sf_route got, want;
            sf_machine_route(m, a, b, &got);
            ref_route(&r, d, a, b, &want);
            if (got.n_links != want.n_links)
                fail_msg("%s %d->%d: %d links, want %d", d->name, a, b, got.n_links, want.n_links);
            double t = 0;
            for (int k = 0; k < got.n_links; k++) {
                if (got.links[k] != want.links[k])
                    fail_msg("%s %d->%d hop %d: link %d, want %d (%s)", d->name, a, b, k,
                             got.links[k], want.links[k], r.links[want.links[k]].name);
                t += r.links[want.links[k]].l.latency_s +
                     1e6 / r.links[want.links[k]].l.bandwidth_Bps;
            }
            assert_true(sf_machine_transfer_time_s(m, a, b, 1e6) == t);
        }
    }
    ref_free(&r);
    sf_machine_free(m);
}

/* Every preset, and small machines of every topology with several nodes and
 * NICs (more NICs than devices, one device per node, PCIe groups of 1 and of
 * a whole node): records, names and routes as the explicit tables had them. */
static void test_links_routes_match_explicit(void **state) {
    (void)state;
    for (int p = 0; p < sf_machine_preset_count(); p++) {
        sf_machine_desc d;
        assert_int_equal(sf_machine_preset_desc(sf_machine_preset_name(p), &d, NULL), SF_OK);
        check_against_ref(&d);
    }
    static const struct {
        sf_intra_topology t;
        int nodes, dpn, nics, group;
    } shapes[] = {
        {SF_INTRA_PAIRWISE, 3, 5, 2, 0},  {SF_INTRA_PAIRWISE, 4, 1, 1, 0},
        {SF_INTRA_PAIRWISE, 1, 9, 3, 0},  {SF_INTRA_SHM, 1, 6, 1, 0},
        {SF_INTRA_SHM, 2, 3, 4, 0},       {SF_INTRA_SWITCH, 2, 7, 3, 0},
        {SF_INTRA_SWITCH, 5, 1, 2, 0},    {SF_INTRA_PCIE_TREE, 3, 8, 2, 2},
        {SF_INTRA_PCIE_TREE, 2, 6, 1, 6}, {SF_INTRA_PCIE_TREE, 2, 4, 5, 1},
    };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        sf_machine_desc d;
        assert_int_equal(sf_machine_preset_desc("k80-16x4", &d, NULL), SF_OK);
        d.intra = shapes[k].t;
        d.nodes = shapes[k].nodes;
        d.devices_per_node = shapes[k].dpn;
        d.nics_per_node = shapes[k].nics;
        d.pcie_group = shapes[k].group;
        snprintf(d.name, sizeof d.name, "%s-%dx%d-k%d-g%d", sf_intra_topology_name(d.intra),
                 d.nodes, d.devices_per_node, d.nics_per_node, d.pcie_group);
        check_against_ref(&d);
    }
}

/* The largest machines: a pairwise node of SF_MAX_DEVICES devices builds (it
 * once took 2 GB) and its 16.8 M links are the ordered pairs, one each: on
 * random pairs the route's one link joins them, and on random link ids the
 * pair the link joins routes over it. Likewise two nodes of 2000. */
static void test_large_pairwise(void **state) {
    (void)state;
    static const int shape[2][2] = {{1, SF_MAX_DEVICES}, {2, 2000}};
    for (int k = 0; k < 2; k++) {
        sf_machine_desc d;
        assert_int_equal(sf_machine_preset_desc("p100-4x4", &d, NULL), SF_OK);
        d.nodes = shape[k][0];
        d.devices_per_node = shape[k][1];
        sf_error err = {0};
        sf_machine *m = sf_machine_build(&d, &err);
        if (!m) fail_msg("%s", err.msg);
        int D = d.devices_per_node, n = sf_machine_num_devices(m);
        assert_int_equal(n, d.nodes * D);
        assert_int_equal(sf_machine_num_links(m), d.nodes * (D * (D - 1) + 2));
        sf_rng rng;
        sf_rng_seed(&rng, 7);
        for (int it = 0; it < 20000; it++) {
            int a = (int)sf_rng_below(&rng, (uint64_t)n), b = (int)sf_rng_below(&rng, (uint64_t)n);
            sf_route r;
            sf_machine_route(m, a, b, &r);
            if (a == b) {
                assert_int_equal(r.n_links, 0);
            } else if (a / D == b / D) {
                assert_int_equal(r.n_links, 1);
                sf_link l = link_of(m, r.links[0]);
                assert_int_equal(l.type, SF_LINK_NVLINK);
                assert_int_equal(l.src_dev, a);
                assert_int_equal(l.dst_dev, b);
                char nb[SF_LINK_NAME_MAX], want[SF_LINK_NAME_MAX];
                snprintf(want, sizeof want, "n%d.d%d->n%d.d%d", a / D, a % D, b / D, b % D);
                assert_string_equal(link_name(m, r.links[0], nb), want);
            } else {
                assert_int_equal(r.n_links, 2);
                assert_int_equal(link_of(m, r.links[0]).type, SF_LINK_NIC_OUT);
                assert_int_equal(link_of(m, r.links[1]).type, SF_LINK_NIC_IN);
            }
            int id = (int)sf_rng_below(&rng, (uint64_t)sf_machine_num_links(m));
            sf_link l = link_of(m, id);
            if (l.type == SF_LINK_NVLINK) {
                sf_machine_route(m, l.src_dev, l.dst_dev, &r);
                assert_int_equal(r.n_links, 1);
                assert_int_equal(r.links[0], id);
            }
        }
        /* the name of the longest kind fits */
        char nb[SF_LINK_NAME_MAX];
        sf_route r;
        sf_machine_route(m, n - 1, n - 2, &r);
        assert_true(strlen(link_name(m, r.links[0], nb)) < SF_LINK_NAME_MAX - 1);
        sf_machine_free(m);
    }
}

static void test_transfer_time(void **state) {
    (void)state;
    sf_machine *m = preset("p100-4x4");
    /* One NVLink: 2 us + 1 MB / 20 GB/s = 2e-6 + 5e-5. */
    assert_close(sf_machine_transfer_time_s(m, 0, 1, 1e6), 2e-6 + 5e-5);
    /* Two EDR links, each 2.5 us + 1 MB / 12.5 GB/s = 2.5e-6 + 8e-5. */
    assert_close(sf_machine_transfer_time_s(m, 0, 5, 1e6), 2 * (2.5e-6 + 8e-5));
    assert_close(sf_machine_transfer_time_s(m, 4, 4, 1e6), 0.0);
    sf_machine_free(m);
    m = preset("k80-16x4");
    /* Four PCIe hops (1 us, 12 GB/s) and two FDR links (2.5 us, 7 GB/s). */
    assert_close(sf_machine_transfer_time_s(m, 0, 4, 1e6),
                 4 * (1e-6 + 1e6 / 12e9) + 2 * (2.5e-6 + 1e6 / 7e9));
    sf_machine_free(m);
}

static void test_subset(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m = preset("p100-4x4");
    sf_machine *s = sf_machine_subset(m, 8, &err);
    assert_non_null(s);
    assert_string_equal(sf_machine_name(s), "p100-4x4[8]");
    assert_int_equal(sf_machine_num_nodes(s), 2);
    assert_int_equal(sf_machine_num_devices(s), 8);
    assert_int_equal(sf_machine_num_links(s), 2 * 14);
    expect_route(s, 0, 5, 2, (sf_link_type[]){SF_LINK_NIC_OUT, SF_LINK_NIC_IN});
    /* Same times as in the whole machine. */
    assert_close(sf_machine_transfer_time_s(s, 1, 6, 1e5),
                 sf_machine_transfer_time_s(m, 1, 6, 1e5));
    sf_machine_free(s);

    s = sf_machine_subset(m, 2, &err);
    assert_non_null(s);
    assert_int_equal(sf_machine_num_nodes(s), 1);
    assert_int_equal(sf_machine_num_devices(s), 2);
    assert_int_equal(sf_machine_num_links(s), 2 + 2);
    check_routes(s);
    sf_machine_free(s);

    assert_null(sf_machine_subset(m, 6, &err)); /* not whole nodes */
    assert_int_equal(err.code, SF_ERR_INVALID);
    assert_contains(err.msg, "whole nodes: N must be at most 4 or a multiple of 4");
    sf_error_clear(&err);
    assert_null(sf_machine_subset(m, 17, &err));
    assert_int_equal(err.code, SF_ERR_RANGE);
    sf_error_clear(&err);
    assert_null(sf_machine_subset(m, 0, &err));
    assert_int_equal(err.code, SF_ERR_RANGE);
    sf_error_clear(&err);
    sf_machine_free(m);

    m = preset("k80-16x4");
    s = sf_machine_subset(m, 1, &err); /* a lone GPU on its switch */
    assert_non_null(s);
    assert_int_equal(sf_machine_get_desc(s)->pcie_group, 1);
    sf_machine_free(s);
    s = sf_machine_subset(m, 2, &err);
    assert_non_null(s);
    expect_route(s, 0, 1, 2, (sf_link_type[]){SF_LINK_SWITCH_UP, SF_LINK_SWITCH_DOWN});
    check_routes(s);
    sf_machine_free(s);
    s = sf_machine_subset(m, 32, &err);
    assert_non_null(s);
    assert_int_equal(sf_machine_num_nodes(s), 8);
    check_routes(s);
    sf_machine_free(s);
    assert_null(sf_machine_subset(m, 3, &err)); /* half a PCIe switch after a full one */
    assert_int_equal(err.code, SF_ERR_INVALID);
    assert_contains(err.msg, "N must be below or a multiple of its pcie_group 2");
    sf_machine_free(m);
}

static void expect_invalid(const sf_machine_desc *d, sf_status code, const char *needle) {
    sf_error err = {0};
    sf_machine *m = sf_machine_build(d, &err);
    if (m) fail_msg("built a machine that should be rejected (%s)", needle);
    assert_int_equal(err.code, code);
    assert_contains(err.msg, needle);
}

static void test_validation(void **state) {
    (void)state;
    sf_machine_desc base, d;
    assert_int_equal(sf_machine_preset_desc("k80-16x4", &base, NULL), SF_OK);
    d = base, d.nodes = 0;
    expect_invalid(&d, SF_ERR_INVALID, "nodes");
    d = base, d.devices_per_node = 0;
    expect_invalid(&d, SF_ERR_INVALID, "devices_per_node");
    d = base, d.nodes = 4096;
    expect_invalid(&d, SF_ERR_RANGE, "limit");
    d = base, d.intra_bw_Bps = 0;
    expect_invalid(&d, SF_ERR_INVALID, "intra-node bandwidth");
    d = base, d.inter_bw_Bps = NAN;
    expect_invalid(&d, SF_ERR_INVALID, "inter-node (NIC) bandwidth");
    d = base, d.intra_latency_s = -1e-6;
    expect_invalid(&d, SF_ERR_INVALID, "intra-node latency");
    d = base, d.pcie_group = 3;
    expect_invalid(&d, SF_ERR_INVALID, "pcie_group");
    d = base, d.pcie_up_bw_Bps = -1;
    expect_invalid(&d, SF_ERR_INVALID, "PCIe");
    d = base, d.nics_per_node = 0;
    expect_invalid(&d, SF_ERR_INVALID, "nics_per_node");
    d = base, d.kind.peak_flops[SF_DTYPE_FP32] = 0;
    expect_invalid(&d, SF_ERR_INVALID, "fp32 peak");
    d = base, d.kind.peak_flops[SF_DTYPE_BF16] = -1;
    expect_invalid(&d, SF_ERR_INVALID, "bf16 peak");
    d = base, d.kind.mem_bytes = 0;
    expect_invalid(&d, SF_ERR_INVALID, "memory size");
    d = base, d.kind.mem_bw_Bps = INFINITY;
    expect_invalid(&d, SF_ERR_INVALID, "memory bandwidth");
    d = base, d.cores_per_node = -1;
    expect_invalid(&d, SF_ERR_INVALID, "cores_per_node");
    d = base, d.copy_bw_Bps = NAN;
    expect_invalid(&d, SF_ERR_INVALID, "copy bandwidth");
    d = base, d.n_sync = SF_MAX_SYNC_POINTS + 1;
    expect_invalid(&d, SF_ERR_INVALID, "all-reduce curve");
    d = base, d.n_sync = 1, d.sync_bytes[0] = 4096, d.sync_bw_Bps[0] = 0.5;
    expect_invalid(&d, SF_ERR_INVALID, "all-reduce point 0: bandwidth");
    d = base, d.n_sync = 2, d.sync_bytes[0] = 4096, d.sync_bytes[1] = 4096;
    d.sync_bw_Bps[0] = d.sync_bw_Bps[1] = 1e9;
    expect_invalid(&d, SF_ERR_INVALID, "all-reduce point 1: sizes must increase");
    /* the curve: its ends beyond them, linear in log(bytes) between points */
    d = base, d.n_sync = 2, d.sync_bytes[0] = 1e3, d.sync_bytes[1] = 1e5;
    d.sync_bw_Bps[0] = 4e9, d.sync_bw_Bps[1] = 2e9;
    assert_true(sf_machine_sync_bw(&d, 10) == 4e9);
    assert_true(sf_machine_sync_bw(&d, 1e9) == 2e9);
    assert_true(fabs(sf_machine_sync_bw(&d, 1e4) - 3e9) < 1e-3);
    assert_true(sf_machine_sync_bw(&base, 1e4) == 0); /* no curve: the links' */
    d = base, d.intra = SF_INTRA_COUNT;
    expect_invalid(&d, SF_ERR_INVALID, "topology");
    /* finite but past the upper bounds, which the messages state */
    d = base, d.kind.peak_flops[SF_DTYPE_FP32] = 1e300;
    expect_invalid(&d, SF_ERR_INVALID, "fp32 peak must be from 1 to 1e+30 FLOP/s");
    d = base, d.kind.peak_flops[SF_DTYPE_FP16] = 2e30;
    expect_invalid(&d, SF_ERR_INVALID, "fp16 peak must be 0 (unsupported) or from 1 to 1e+30");
    d = base, d.kind.mem_bw_Bps = 1e300;
    expect_invalid(&d, SF_ERR_INVALID, "memory bandwidth must be from 1 to 1e+30 B/s");
    d = base, d.kind.mem_bytes = 1e300;
    expect_invalid(&d, SF_ERR_INVALID, "memory size must be above 0 and at most 1e+30 bytes");
    d = base, d.intra_bw_Bps = 1e300;
    expect_invalid(&d, SF_ERR_INVALID, "intra-node bandwidth must be from 1 to 1e+30");
    d = base, d.inter_bw_Bps = 1e300;
    expect_invalid(&d, SF_ERR_INVALID, "inter-node (NIC) bandwidth must be from 1 to 1e+30");
    d = base, d.intra = SF_INTRA_PCIE_TREE, d.pcie_group = 2, d.pcie_up_bw_Bps = 1e300;
    expect_invalid(&d, SF_ERR_INVALID, "PCIe switch-to-host bandwidth must be from 1 to 1e+30");
    /* the bounds themselves are allowed */
    d = base, d.kind.peak_flops[SF_DTYPE_FP32] = SF_MAX_RATE, d.kind.mem_bytes = SF_MAX_MEM_BYTES;
    d.intra_bw_Bps = d.inter_bw_Bps = d.kind.mem_bw_Bps = SF_MAX_RATE;
    assert_int_equal(sf_machine_desc_validate(&d, NULL), SF_OK);
    d = base, d.name[0] = '\0';
    expect_invalid(&d, SF_ERR_INVALID, "name");
    /* A non-PCIe topology ignores the PCIe fields. */
    d = base, d.intra = SF_INTRA_SWITCH, d.pcie_group = 0;
    sf_machine *m = sf_machine_build(&d, NULL);
    assert_non_null(m);
    sf_machine_free(m);
    sf_error err = {0};
    assert_null(sf_machine_build(NULL, &err));
    assert_int_equal(err.code, SF_ERR_INVALID);
}

static void assert_desc_equal(const sf_machine_desc *a, const sf_machine_desc *b) {
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->nodes, b->nodes);
    assert_int_equal(a->devices_per_node, b->devices_per_node);
    assert_string_equal(a->kind.name, b->kind.name);
    for (int t = 0; t < SF_DTYPE_COUNT; t++)
        assert_true(a->kind.peak_flops[t] == b->kind.peak_flops[t]);
    assert_true(a->kind.mem_bw_Bps == b->kind.mem_bw_Bps);
    assert_true(a->kind.mem_bytes == b->kind.mem_bytes);
    assert_int_equal(a->intra, b->intra);
    assert_true(a->intra_bw_Bps == b->intra_bw_Bps);
    assert_true(a->intra_latency_s == b->intra_latency_s);
    assert_int_equal(a->pcie_group, b->pcie_group);
    assert_true(a->pcie_up_bw_Bps == b->pcie_up_bw_Bps);
    assert_int_equal(a->nics_per_node, b->nics_per_node);
    assert_true(a->inter_bw_Bps == b->inter_bw_Bps);
    assert_true(a->inter_latency_s == b->inter_latency_s);
    assert_int_equal(a->cores_per_node, b->cores_per_node);
    assert_true(a->copy_bw_Bps == b->copy_bw_Bps);
    assert_true(a->copy_run_s == b->copy_run_s);
    assert_int_equal(a->sync_after_backward, b->sync_after_backward);
    assert_int_equal(a->n_sync, b->n_sync);
    for (int i = 0; i < a->n_sync; i++) {
        assert_true(a->sync_bytes[i] == b->sync_bytes[i]);
        assert_true(a->sync_bw_Bps[i] == b->sync_bw_Bps[i]);
    }
}

static void test_json_roundtrip_presets(void **state) {
    (void)state;
    sf_error err = {0};
    for (int p = 0; p < sf_machine_preset_count(); p++) {
        sf_machine_desc d, back;
        assert_int_equal(sf_machine_preset_desc(sf_machine_preset_name(p), &d, &err), SF_OK);
        char *text = sf_machine_desc_to_json(&d, &err);
        assert_non_null(text);
        memset(&back, 0x5a, sizeof back);
        if (sf_machine_desc_parse_json(text, "mem", &back, &err) != SF_OK) fail_msg("%s", err.msg);
        assert_desc_equal(&d, &back);

        /* Through a file, and the text is stable. */
        char path[256];
        snprintf(path, sizeof path, "%s/%s.json", tmpdir, d.name);
        assert_int_equal(sf_machine_desc_save_json(&d, path, &err), SF_OK);
        memset(&back, 0, sizeof back);
        assert_int_equal(sf_machine_desc_load_json(path, &back, &err), SF_OK);
        assert_desc_equal(&d, &back);
        char *again = sf_machine_desc_to_json(&back, &err);
        assert_string_equal(text, again);
        sf_machine *m = sf_machine_open(path, &err), *ref = preset(d.name);
        assert_non_null(m);
        assert_int_equal(sf_machine_num_links(m), sf_machine_num_links(ref));
        sf_machine_free(ref);
        sf_machine_free(m);
        free(again);
        free(text);
    }
}

/* Data-sheet numbers read as typed: no "10.599999999999999" in files. */
static void test_json_readable(void **state) {
    (void)state;
    sf_machine_desc d;
    assert_int_equal(sf_machine_preset_desc("p100-4x4", &d, NULL), SF_OK);
    char *text = sf_machine_desc_to_json(&d, NULL);
    assert_non_null(text);
    assert_contains(text, "\"fp32\": 10.6,");
    assert_contains(text, "\"latency_us\": 2.5\n");
    assert_contains(text, "\"topology\": \"pairwise\"");
    assert_null(strstr(text, "pcie_group"));
    assert_int_equal(text[strlen(text) - 1], '\n');
    free(text);
}

/* Random numbers with up to 15 significant digits (any figure a person
 * writes) survive desc -> JSON -> desc exactly. Doubles that need 16 or 17
 * digits cannot all survive a change of unit held in one double (in some
 * binades the file-unit doubles are sparser than the base-unit ones), so for
 * those the promise is one ulp. */
static double digits15(sf_rng *rng, double scale) {
    char buf[64];
    snprintf(buf, sizeof buf, "%.14e", (0.1 + sf_rng_uniform(rng)) * scale);
    return strtod(buf, NULL);
}

static void random_desc(sf_rng *rng, sf_machine_desc *d, int short_digits) {
    static const double unit[9] = {1e12, 1e12, 1e9, 1e9, 1, 1, 1e9, 1, 1e-6};
    /* decimal exponents from 10^-20 on, as far as each figure may go: rates
     * (peaks, bandwidths) from SF_MIN_RATE to SF_MAX_RATE, memory up to
     * SF_MAX_MEM_BYTES, latencies <= SF_MAX_LATENCY_S */
    static const int e_lo[9] = {-10, -10, -7, -20, 2, -20, -7, 2, -20};
    static const int e_hi[9] = {17, 17, 19, 19, 19, -1, 19, 19, 5}; /* <= SF_MAX_RATE, _MEM_BYTES */
    double v[9];
    for (int i = 0; i < 9; i++) {
        double e = e_lo[i] + (double)sf_rng_below(rng, (uint64_t)(e_hi[i] - e_lo[i] + 1));
        double s = pow(10, e);
        v[i] = short_digits ? digits15(rng, s * unit[i])
                            : (0.1 + sf_rng_uniform(rng)) * s * unit[i];
    }
    d->kind.peak_flops[SF_DTYPE_FP32] = v[0];
    d->kind.peak_flops[SF_DTYPE_FP16] = v[1];
    d->kind.mem_bw_Bps = v[2];
    d->kind.mem_bytes = v[3];
    d->intra_bw_Bps = v[4];
    d->intra_latency_s = v[5];
    d->pcie_up_bw_Bps = v[6];
    d->inter_bw_Bps = v[7];
    d->inter_latency_s = v[8];
    /* the runtime object: absent, or any of its five fields */
    int r = (int)sf_rng_below(rng, 32);
    d->cores_per_node = r & 1 ? 1 + (int)sf_rng_below(rng, 64) : 0;
    d->copy_bw_Bps = r & 2 ? v[2] : 0;
    d->copy_run_s = r & 8 ? v[5] : 0; /* a latency */
    d->sync_after_backward = (r & 16) != 0;
    d->n_sync = r & 4 ? 1 + (int)sf_rng_below(rng, SF_MAX_SYNC_POINTS) : 0;
    for (int i = 0; i < d->n_sync; i++) {
        d->sync_bytes[i] = (double)((int64_t)1 << (2 * i + (int)sf_rng_below(rng, 2)));
        d->sync_bw_Bps[i] = i % 2 ? v[7] : v[4]; /* rates, short digits when asked */
    }
}

static int within_ulp(double a, double b) { return a == b || nextafter(a, b) == b; }

static void test_json_roundtrip_random(void **state) {
    (void)state;
    sf_rng rng;
    sf_rng_seed(&rng, 12345);
    sf_machine_desc d, back;
    assert_int_equal(sf_machine_preset_desc("k80-16x4", &d, NULL), SF_OK);
    for (int it = 0; it < 4000; it++) {
        int short_digits = it % 2 == 0;
        random_desc(&rng, &d, short_digits);
        sf_error err = {0};
        char *text = sf_machine_desc_to_json(&d, &err);
        assert_non_null(text);
        if (sf_machine_desc_parse_json(text, "random", &back, &err) != SF_OK)
            fail_msg("%s\n%s", err.msg, text);
        if (short_digits) {
            assert_desc_equal(&d, &back);
        } else {
            assert_true(within_ulp(d.kind.peak_flops[0], back.kind.peak_flops[0]));
            assert_true(within_ulp(d.kind.peak_flops[1], back.kind.peak_flops[1]));
            assert_true(within_ulp(d.kind.mem_bw_Bps, back.kind.mem_bw_Bps));
            assert_true(within_ulp(d.kind.mem_bytes, back.kind.mem_bytes));
            assert_true(within_ulp(d.intra_bw_Bps, back.intra_bw_Bps));
            assert_true(within_ulp(d.intra_latency_s, back.intra_latency_s));
            assert_true(within_ulp(d.pcie_up_bw_Bps, back.pcie_up_bw_Bps));
            if (!within_ulp(d.inter_bw_Bps, back.inter_bw_Bps))
                fail_msg("%.17g -> %.17g\n%s", d.inter_bw_Bps, back.inter_bw_Bps, text);
            assert_true(within_ulp(d.inter_latency_s, back.inter_latency_s));
            assert_int_equal(d.cores_per_node, back.cores_per_node);
            assert_true(within_ulp(d.copy_bw_Bps, back.copy_bw_Bps));
            assert_true(within_ulp(d.copy_run_s, back.copy_run_s));
            assert_int_equal(d.sync_after_backward, back.sync_after_backward);
            assert_int_equal(d.n_sync, back.n_sync);
            for (int i = 0; i < d.n_sync; i++) {
                assert_true(d.sync_bytes[i] == back.sync_bytes[i]);
                assert_true(within_ulp(d.sync_bw_Bps[i], back.sync_bw_Bps[i]));
            }
        }
        free(text);
    }
}

static const char base_json[] =
    "{\n"
    "  \"name\": \"mine\",\n"
    "  \"nodes\": 2,\n"
    "  \"devices_per_node\": 4,\n"
    "  \"device\": {\n"
    "    \"name\": \"gpu\",\n"
    "    \"peak_tflops\": {\"fp32\": 10, \"fp16\": 20},\n"
    "    \"mem_bw_GBps\": 700,\n"
    "    \"mem_GB\": 16\n"
    "  },\n"
    "  \"intra\": {\"topology\": \"pcie_tree\", \"bandwidth_GBps\": 12, \"latency_us\": 1,\n"
    "            \"pcie_group\": 2, \"pcie_up_GBps\": 16},\n"
    "  \"inter\": {\"nics_per_node\": 1, \"bandwidth_GBps\": 12.5, \"latency_us\": 2}\n"
    "}\n";

/* base_json with `from` replaced by `to`, written to tmpdir/name. */
static const char *write_variant(const char *name, const char *from, const char *to) {
    static char path[160];
    char text[2048];
    const char *at = from ? strstr(base_json, from) : NULL;
    if (from && !at) fail_msg("'%s' not in the base text", from);
    if (at)
        snprintf(text, sizeof text, "%.*s%s%s", (int)(at - base_json), base_json, to,
                 at + strlen(from));
    else
        snprintf(text, sizeof text, "%s", base_json);
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static void expect_json_error(const char *name, const char *from, const char *to, sf_status code,
                              const char *needle) {
    const char *path = write_variant(name, from, to);
    sf_error err = {0};
    sf_machine *m = sf_machine_open(path, &err);
    if (m) fail_msg("%s: accepted", name);
    assert_int_equal(err.code, code);
    assert_contains(err.msg, path);
    assert_contains(err.msg, needle);
    sf_machine_desc d;
    sf_error_clear(&err);
    assert_int_equal(sf_machine_desc_load_json(path, &d, &err), code);
}

static void test_json_base_ok(void **state) {
    (void)state;
    sf_error err = {0};
    const char *path = write_variant("ok.json", NULL, NULL);
    sf_machine *m = sf_machine_open(path, &err);
    if (!m) fail_msg("%s", err.msg);
    const sf_machine_desc *d = sf_machine_get_desc(m);
    assert_true(d->kind.peak_flops[SF_DTYPE_FP32] == 10e12);
    assert_true(d->kind.peak_flops[SF_DTYPE_BF16] == 0); /* absent: unsupported */
    assert_true(d->inter_bw_Bps == 12.5e9);
    assert_true(d->intra_latency_s == 1e-6);
    assert_true(d->pcie_up_bw_Bps == 16e9);
    assert_int_equal(sf_machine_num_devices(m), 8);
    assert_int_equal(d->cores_per_node, 0); /* no runtime object: none of its costs */
    assert_true(d->copy_bw_Bps == 0 && d->n_sync == 0);
    sf_machine_free(m);
    /* the runtime object, as calibrate writes it; any field may be left out */
    path = write_variant("runtime.json", "\"inter\": {",
                         "\"runtime\": {\"cores_per_node\": 2, \"copy_GBps\": 25.5, "
                         "\"allreduce\": [{\"bytes\": 4096, \"link_GBps\": 0.75}, "
                         "{\"bytes\": 67108864, \"link_GBps\": 1.25}]},\n  \"inter\": {");
    m = sf_machine_open(path, &err);
    if (!m) fail_msg("%s", err.msg);
    d = sf_machine_get_desc(m);
    assert_int_equal(d->cores_per_node, 2);
    assert_true(d->copy_bw_Bps == 25.5e9);
    assert_int_equal(d->n_sync, 2);
    assert_true(d->sync_bytes[0] == 4096 && d->sync_bw_Bps[0] == 0.75e9);
    assert_true(d->sync_bytes[1] == 67108864 && d->sync_bw_Bps[1] == 1.25e9);
    sf_machine_free(m);
    path = write_variant("runtime1.json", "\"inter\": {",
                         "\"runtime\": {\"copy_GBps\": 3},\n  \"inter\": {");
    m = sf_machine_open(path, &err);
    if (!m) fail_msg("%s", err.msg);
    d = sf_machine_get_desc(m);
    assert_true(d->cores_per_node == 0 && d->copy_bw_Bps == 3e9 && d->n_sync == 0);
    sf_machine_free(m);
}

static void test_json_errors(void **state) {
    (void)state;
    /* Syntax: the line and column of the fault. */
    expect_json_error("syntax.json", "\"nodes\": 2,", "\"nodes\": ,", SF_ERR_PARSE, ".json:3:");
    expect_json_error("dup.json", "\"nodes\": 2,", "\"nodes\": 2, \"nodes\": 3,", SF_ERR_PARSE,
                      ".json:3:");
    expect_json_error("array.json", "{\n  \"name\"", "[{\n  \"name\"", SF_ERR_PARSE, ":");
    /* Structure. */
    expect_json_error("unknown.json", "\"nodes\": 2,", "\"nodes\": 2, \"colour\": 1,", SF_ERR_PARSE,
                      "field 'colour': unknown field");
    expect_json_error("unknown2.json", "\"fp16\": 20", "\"fp16\": 20, \"fp8\": 40", SF_ERR_PARSE,
                      "field 'device.peak_tflops.fp8': unknown field");
    expect_json_error("missing.json", ",\n  \"inter\": {\"nics_per_node\": 1, "
                      "\"bandwidth_GBps\": 12.5, \"latency_us\": 2}", "", SF_ERR_PARSE,
                      "field 'inter': missing");
    expect_json_error("missing2.json", "\"mem_GB\": 16", "\"mem_G\": 16", SF_ERR_PARSE,
                      "field 'device.mem_G': unknown");
    expect_json_error("type.json", "\"nodes\": 2,", "\"nodes\": \"2\",", SF_ERR_PARSE,
                      "field 'nodes': must be an integer");
    expect_json_error("type2.json", "\"nodes\": 2,", "\"nodes\": 2.5,", SF_ERR_PARSE,
                      "field 'nodes': must be an integer");
    /* Values. */
    expect_json_error("negbw.json", "\"bandwidth_GBps\": 12,", "\"bandwidth_GBps\": -12,",
                      SF_ERR_INVALID,
                      "field 'intra.bandwidth_GBps': must be a number from 1e-09 to 1e+21");
    expect_json_error("neglat.json", "\"latency_us\": 2}", "\"latency_us\": -2}", SF_ERR_INVALID,
                      "field 'inter.latency_us': must be a number from 0 to 1e+06");
    /* Positive or finite is not enough: a subnormal bandwidth or a latency of
     * 1e308 us made simulated times infinite (invalid traces and JSON). */
    expect_json_error("tinybw.json", "\"bandwidth_GBps\": 12,", "\"bandwidth_GBps\": 1e-320,",
                      SF_ERR_INVALID,
                      "field 'intra.bandwidth_GBps': must be a number from 1e-09 to 1e+21");
    expect_json_error("biglat.json", "\"latency_us\": 2}", "\"latency_us\": 1e308}",
                      SF_ERR_INVALID, "field 'inter.latency_us': must be a number from 0 to");
    expect_json_error("tinyfp16.json", "\"fp16\": 20", "\"fp16\": 1e-300", SF_ERR_INVALID,
                      "field 'device.peak_tflops.fp16': must be 0 (unsupported) or a number from ");
    expect_json_error("topo.json", "pcie_tree", "ring", SF_ERR_INVALID,
                      "field 'intra.topology': unknown topology 'ring'");
    expect_json_error("group.json", "\"pcie_group\": 2", "\"pcie_group\": 3", SF_ERR_INVALID,
                      "field 'intra.pcie_group': 3 does not divide");
    expect_json_error("pcieonly.json", "pcie_tree", "switch", SF_ERR_INVALID,
                      "field 'intra.pcie_group': only allowed");
    expect_json_error("nodes0.json", "\"nodes\": 2,", "\"nodes\": 0,", SF_ERR_INVALID,
                      "field 'nodes': must be an integer from 1");
    expect_json_error("name.json", "\"name\": \"mine\"", "\"name\": \"\"", SF_ERR_INVALID,
                      "field 'name'");
    expect_json_error("toobig.json", "\"nodes\": 2,", "\"nodes\": 2000,", SF_ERR_RANGE, "limit");
    /* A NUL byte ended the text that jansson saw: a whole machine followed by
     * a NUL and anything at all was accepted. Now the file is refused, as is a
     * directory (with the system's reason). */
    char path[160];
    snprintf(path, sizeof path, "%s/nul.json", tmpdir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(base_json, 1, sizeof base_json, f); /* sizeof: the NUL too */
    fputs("\"nodes\": -5}", f);
    fclose(f);
    sf_error err = {0};
    sf_machine_desc d;
    assert_int_equal(sf_machine_desc_load_json(path, &d, &err), SF_ERR_PARSE);
    assert_contains(err.msg, path);
    assert_contains(err.msg, "NUL byte");
    sf_error_clear(&err);
    assert_int_equal(sf_machine_desc_load_json(tmpdir, &d, &err), SF_ERR_IO);
    assert_contains(err.msg, "directory");
    expect_json_error("fp32.json", "\"fp32\": 10", "\"fp32\": 0", SF_ERR_INVALID,
                      "field 'device.peak_tflops.fp32': must be a number from 1e-12 to 1e+18");
    /* 1e300 is >= the lower bound but overflowed once in base units: the
     * message gives the upper bound too, in the file's units */
    expect_json_error("bigfp32.json", "\"fp32\": 10", "\"fp32\": 1e300", SF_ERR_INVALID,
                      "field 'device.peak_tflops.fp32': must be a number from 1e-12 to 1e+18");
    expect_json_error("bigfp16.json", "\"fp16\": 20", "\"fp16\": 1.1e18", SF_ERR_INVALID,
                      "field 'device.peak_tflops.fp16': must be 0 (unsupported) or a number "
                      "from 1e-12 to 1e+18");
    expect_json_error("bigmembw.json", "\"mem_bw_GBps\": 700", "\"mem_bw_GBps\": 1e300",
                      SF_ERR_INVALID,
                      "field 'device.mem_bw_GBps': must be a number from 1e-09 to 1e+21");
    expect_json_error("bigmem.json", "\"mem_GB\": 16", "\"mem_GB\": 1e300", SF_ERR_INVALID,
                      "field 'device.mem_GB': must be a number above 0 and at most 1e+21");
    expect_json_error("bigintra.json", "\"bandwidth_GBps\": 12,", "\"bandwidth_GBps\": 1e300,",
                      SF_ERR_INVALID,
                      "field 'intra.bandwidth_GBps': must be a number from 1e-09 to 1e+21");
    expect_json_error("bigup.json", "\"pcie_up_GBps\": 16", "\"pcie_up_GBps\": 2e21",
                      SF_ERR_INVALID,
                      "field 'intra.pcie_up_GBps': must be a number from 1e-09 to 1e+21");
    expect_json_error("biginter.json", "\"bandwidth_GBps\": 12.5", "\"bandwidth_GBps\": 1e300",
                      SF_ERR_INVALID,
                      "field 'inter.bandwidth_GBps': must be a number from 1e-09 to 1e+21");
    expect_json_error("rtkey.json", "\"inter\": {", "\"runtime\": {\"cores\": 2}, \"inter\": {",
                      SF_ERR_PARSE, "field 'runtime.cores': unknown field");
    expect_json_error("rttype.json", "\"inter\": {", "\"runtime\": 2, \"inter\": {", SF_ERR_PARSE,
                      "field 'runtime': must be an object");
    expect_json_error("rtcores.json", "\"inter\": {",
                      "\"runtime\": {\"cores_per_node\": -1}, \"inter\": {", SF_ERR_INVALID,
                      "field 'runtime.cores_per_node': must be an integer from 0 to 4096");
    expect_json_error("rtcopy.json", "\"inter\": {", "\"runtime\": {\"copy_GBps\": -3}, \"inter\": {",
                      SF_ERR_INVALID, "field 'runtime.copy_GBps': must be 0 (unsupported) or a number");
    expect_json_error("rtsync.json", "\"inter\": {",
                      "\"runtime\": {\"allreduce\": [{\"bytes\": 8, \"link_GBps\": 1e300}]}, "
                      "\"inter\": {",
                      SF_ERR_INVALID,
                      "field 'runtime.allreduce[0].link_GBps': must be a number from 1e-09");
    expect_json_error("rtsync2.json", "\"inter\": {",
                      "\"runtime\": {\"allreduce\": [{\"bytes\": 8, \"link_GBps\": 1}, "
                      "{\"bytes\": 8, \"link_GBps\": 1}]}, \"inter\": {",
                      SF_ERR_INVALID,
                      "field 'runtime.allreduce[1].bytes': must be at least 1 and above");
    expect_json_error("rtsync3.json", "\"inter\": {",
                      "\"runtime\": {\"allreduce\": {\"bytes\": 8}}, \"inter\": {", SF_ERR_PARSE,
                      "field 'runtime.allreduce': must be an array");
    expect_json_error("rtsync4.json", "\"inter\": {",
                      "\"runtime\": {\"allreduce\": [{\"bytes\": 8, \"GBps\": 1}]}, \"inter\": {",
                      SF_ERR_PARSE, "field 'runtime.allreduce[0].GBps': unknown field");
    /* the upper bounds themselves read */
    const char *at_bound = write_variant("bound.json", "\"fp32\": 10", "\"fp32\": 1e18");
    sf_error_clear(&err);
    sf_machine *mb = sf_machine_open(at_bound, &err);
    if (!mb) fail_msg("%s", err.msg);
    assert_true(sf_machine_get_desc(mb)->kind.peak_flops[SF_DTYPE_FP32] == SF_MAX_RATE);
    sf_machine_free(mb);
}

static void test_open(void **state) {
    (void)state;
    sf_error err = {0};
    sf_machine *m = sf_machine_open("dgx-h100", &err);
    assert_non_null(m);
    assert_int_equal(sf_machine_num_devices(m), 64);
    sf_machine_free(m);

    assert_null(sf_machine_open("nosuch", &err));
    assert_int_equal(err.code, SF_ERR_NOTFOUND);
    assert_contains(err.msg, "'nosuch'");
    assert_contains(err.msg, "p100-4x4, k80-16x4, dgx-1v, dgx-a100, dgx-h100, cpu");
    sf_error_clear(&err);
    sf_machine_desc d;
    assert_int_equal(sf_machine_preset_desc("nosuch", &d, &err), SF_ERR_NOTFOUND);
    sf_error_clear(&err);

    char path[160];
    snprintf(path, sizeof path, "%s/absent/m.json", tmpdir);
    assert_null(sf_machine_open(path, &err));
    assert_int_equal(err.code, SF_ERR_IO);
    assert_contains(err.msg, path);
    sf_error_clear(&err);
    assert_null(sf_machine_open("absent.json", &err)); /* ".json": a path, not a preset */
    assert_int_equal(err.code, SF_ERR_IO);
    assert_contains(err.msg, "absent.json");
    sf_error_clear(&err);
    assert_null(sf_machine_open("", &err));
    assert_int_equal(err.code, SF_ERR_INVALID);
    sf_error_clear(&err);

    /* NAME[N]: a device count that overflows an int is refused, not wrapped
     * ([4294967297] was the 1-device subset), and only digits are a count */
    m = sf_machine_open("p100-4x4[4]", &err);
    assert_non_null(m);
    assert_int_equal(sf_machine_num_devices(m), 4);
    sf_machine_free(m);
    static const char *const too_many[] = {"p100-4x4[4294967297]", "p100-4x4[99999999999999999999]",
                                           "p100-4x4[4097]"};
    for (int i = 0; i < 3; i++) {
        assert_null(sf_machine_open(too_many[i], &err));
        assert_int_equal(err.code, SF_ERR_RANGE);
        assert_contains(err.msg, too_many[i]);
        sf_error_clear(&err);
    }
    static const char *const not_counts[] = {"p100-4x4[ 4]", "p100-4x4[+4]", "p100-4x4[-1]",
                                             "p100-4x4[0]", "p100-4x4[4x]"};
    for (int i = 0; i < 5; i++) {
        assert_null(sf_machine_open(not_counts[i], &err));
        assert_int_equal(err.code, SF_ERR_INVALID);
        assert_contains(err.msg, "device count");
        sf_error_clear(&err);
    }

    /* NAME[N] of a file: the message names the file as written, not the
     * file's "name" field (base_json: 2 nodes of 4, PCIe switches of 2) */
    const char *file = write_variant("sub.json", NULL, NULL);
    char spec[256];
    snprintf(spec, sizeof spec, "%s[6]", file);
    assert_null(sf_machine_open(spec, &err));
    assert_int_equal(err.code, SF_ERR_INVALID);
    assert_contains(err.msg, "machine '");
    assert_contains(err.msg, spec);
    assert_contains(err.msg, "N must be at most 4 or a multiple of 4");
    if (strstr(err.msg, "'mine'")) fail_msg("names the file's name field: %s", err.msg);
    sf_error_clear(&err);
    snprintf(spec, sizeof spec, "%s[3]", file);
    assert_null(sf_machine_open(spec, &err));
    assert_contains(err.msg, spec);
    assert_contains(err.msg, "pcie_group 2");
    if (strstr(err.msg, "'mine'")) fail_msg("names the file's name field: %s", err.msg);
    sf_error_clear(&err);
    snprintf(spec, sizeof spec, "%s[9]", file);
    assert_null(sf_machine_open(spec, &err));
    assert_int_equal(err.code, SF_ERR_RANGE);
    assert_contains(err.msg, spec);
    sf_error_clear(&err);
    snprintf(spec, sizeof spec, "%s[2]", file);
    m = sf_machine_open(spec, &err);
    if (!m) fail_msg("%s", err.msg);
    assert_int_equal(sf_machine_num_devices(m), 2);
    sf_machine_free(m);

    /* A bare name that is no preset but a file in the working directory. */
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    write_variant("plainname", NULL, NULL);
    assert_int_equal(chdir(tmpdir), 0);
    m = sf_machine_open("plainname", &err);
    assert_int_equal(chdir(cwd), 0);
    if (!m) fail_msg("%s", err.msg);
    assert_string_equal(sf_machine_name(m), "mine");
    sf_machine_free(m);

    /* Saving where it cannot write leaves nothing and says where. */
    assert_int_equal(sf_machine_preset_desc("cpu", &d, &err), SF_OK);
    assert_int_equal(sf_machine_desc_save_json(&d, path, &err), SF_ERR_IO);
    assert_contains(err.msg, path);
    sf_error_clear(&err);
    d.nodes = 0; /* never write a file the reader would refuse */
    assert_null(sf_machine_desc_to_json(&d, &err));
    assert_int_equal(err.code, SF_ERR_INVALID);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_presets_build),
        cmocka_unit_test(test_route_shapes),
        cmocka_unit_test(test_route_connectivity),
        cmocka_unit_test(test_links_routes_match_explicit),
        cmocka_unit_test(test_large_pairwise),
        cmocka_unit_test(test_transfer_time),
        cmocka_unit_test(test_subset),
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_json_roundtrip_presets),
        cmocka_unit_test(test_json_readable),
        cmocka_unit_test(test_json_roundtrip_random),
        cmocka_unit_test(test_json_base_ok),
        cmocka_unit_test(test_json_errors),
        cmocka_unit_test(test_open),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

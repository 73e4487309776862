/*
 * taskbench-starpu: Task Bench's task graphs (Slaughter et al., SC 2020) run on StarPU
 * 1.3, so that taskwatt's METG sweep can measure StarPU beside itself on the same
 * graphs, kernels and report lines.
 *
 * The reference for every definition here is taskwatt's own Task Bench
 * (src/taskbench/): graph.rs (patterns, widths, dependence sets), kernel.rs
 * (compute_bound and its FLOP count), stf.rs (which data handle a task reads and
 * writes), point.rs (the input check and the hash chain behind "Checksum"), app.rs
 * (configuration display and report_timing). Task counts, dependency counts, FLOPs and
 * the checksum must agree with `taskwatt bench taskbench` for the same flags.
 *
 * Data mapping (as stf.rs and Task Bench's StarPU port): an F x width matrix of StarPU
 * variable handles of -output bytes each; task (t, x) writes handle (t % F, x) and reads
 * handle ((t - 1) % F, d) for each dependency d, so StarPU infers every edge from the
 * accesses. The timer covers submission plus starpu_task_wait_for_all() only.
 *
 * Build: benches/starpu/build.sh. Usage: see usage() below or README.md.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <immintrin.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <starpu.h>

/* Exit statuses: 2 for a bad command line or a graph Task Bench rejects (the sweep
 * tells these from runtime failures), 1 for a runtime failure (StarPU would not start). A
 * task that sees corrupt input aborts, as Task Bench's assert would. */
enum { EXIT_USAGE = 2, EXIT_RUNTIME = 1 };

enum pattern {
    P_TRIVIAL,
    P_NO_COMM,
    P_STENCIL_1D,
    P_STENCIL_1D_PERIODIC,
    P_DOM,
    P_TREE,
    P_FFT,
    P_ALL_TO_ALL,
    P_NEAREST,
    P_SPREAD,
    P_COUNT
};

/* Task Bench's names, indexed by enum pattern. random_nearest is left out: it needs Task
 * Bench's MurmurHash3-based random numbers (taskwatt's random.rs). */
static const char *const PATTERN_NAMES[P_COUNT] = {
    "trivial", "no_comm", "stencil_1d", "stencil_1d_periodic", "dom",
    "tree",    "fft",     "all_to_all", "nearest",             "spread",
};

enum kernel { K_EMPTY, K_COMPUTE_BOUND };

/* One task graph, with Task Bench's defaults (TaskGraph::new + finish in graph.rs). */
struct graph {
    int64_t steps, width, radix, period, fields, iter;
    int64_t output_bytes;
    enum pattern dep;
    enum kernel kernel;
};

/* ---------------------------------------------------------------------------------- */
/* The graph: the same definitions as graph.rs (and Task Bench's core.cc).             */

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

static int needs_period(enum pattern p) { return p == P_SPREAD; }

static int64_t offset_at(const struct graph *g, int64_t t)
{
    if (t < 0)
        return 0;
    return g->dep == P_DOM ? max64(0, t + g->width - g->steps) : 0;
}

static int64_t width_at(const struct graph *g, int64_t t)
{
    if (t < 0)
        return 0;
    switch (g->dep) {
    case P_DOM:
        return min64(g->width, min64(t + 1, g->steps - t));
    case P_TREE:
        return min64(g->width, (int64_t)1 << min64(t, 62));
    default:
        return g->width;
    }
}

/* ceil(log2(w)) for fft, computed on integers (exact where graph.rs's f64 is exact). */
static int64_t ceil_log2(int64_t w)
{
    int64_t k = 0;
    while (k < 62 && ((int64_t)1 << k) < w)
        k++;
    return k;
}

static int64_t max_dsets(const struct graph *g)
{
    switch (g->dep) {
    case P_FFT:
        return ceil_log2(g->width);
    case P_SPREAD:
        return g->period;
    default:
        return 1;
    }
}

static int64_t dset_at(const struct graph *g, int64_t t)
{
    int64_t n = max_dsets(g);
    switch (g->dep) {
    case P_FFT:
        return (t + n - 1) % n;
    case P_SPREAD:
        return t % n;
    default:
        return 0;
    }
}

/* A growable list of points. */
struct points {
    int64_t *v;
    size_t n, cap;
};

static void push(struct points *p, int64_t x)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 64;
        p->v = realloc(p->v, p->cap * sizeof *p->v);
        if (!p->v) {
            perror("taskbench-starpu: realloc");
            exit(EXIT_RUNTIME);
        }
    }
    p->v[p->n++] = x;
}

static void push_range(struct points *p, int64_t first, int64_t last)
{
    for (int64_t i = first; i <= last; i++)
        push(p, i);
}

/* Appends the points of timestep t - 1 that `point` depends on under dependence set
 * `dset`, before clamping, in Task Bench's order (graph.rs `dependencies`). */
static void dependencies(const struct graph *g, int64_t dset, int64_t point, struct points *out)
{
    int64_t w = g->width;
    switch (g->dep) {
    case P_TRIVIAL:
        break;
    case P_NO_COMM:
        push(out, point);
        break;
    case P_STENCIL_1D:
        push_range(out, max64(0, point - 1), min64(point + 1, w - 1));
        break;
    case P_STENCIL_1D_PERIODIC:
        push_range(out, max64(0, point - 1), min64(point + 1, w - 1));
        if (point - 1 < 0)
            push(out, w - 1);
        if (point + 1 >= w)
            push(out, 0);
        break;
    case P_DOM:
        push_range(out, max64(0, point - 1), point);
        break;
    case P_TREE:
        push(out, point / 2);
        break;
    case P_FFT: {
        int64_t d1 = point - ((int64_t)1 << dset), d2 = point + ((int64_t)1 << dset);
        if (d1 >= 0)
            push(out, d1);
        push(out, point);
        if (d2 < w)
            push(out, d2);
        break;
    }
    case P_ALL_TO_ALL:
        push_range(out, 0, w - 1);
        break;
    case P_NEAREST:
        if (g->radix > 0)
            push_range(out, max64(0, point - g->radix / 2),
                       min64(point + (g->radix - 1) / 2, w - 1));
        break;
    case P_SPREAD:
        for (int64_t i = 0; i < g->radix; i++) {
            int64_t shift = i > 0 ? dset : 0;
            push(out, (point + i * w / g->radix + shift) % w);
        }
        break;
    case P_COUNT:
        break;
    }
}

/* Every point's dependencies, materialised once per dependence set (point.rs DepTable):
 * the points of (dset, x) are pts.v[start[dset * width + x] .. start[... + 1]). */
struct dep_table {
    struct points pts;
    size_t *start;
};

static void dep_table_build(const struct graph *g, struct dep_table *d)
{
    int64_t sets = max64(max_dsets(g), 1);
    size_t n = (size_t)(sets * g->width);
    memset(d, 0, sizeof *d);
    d->start = malloc((n + 1) * sizeof *d->start);
    if (!d->start) {
        perror("taskbench-starpu: malloc");
        exit(EXIT_RUNTIME);
    }
    for (int64_t s = 0; s < sets; s++)
        for (int64_t x = 0; x < g->width; x++) {
            d->start[s * g->width + x] = d->pts.n;
            dependencies(g, s, x, &d->pts);
        }
    d->start[n] = d->pts.n;
}

/* The inputs of task (t, x): its dependencies clamped to timestep t - 1's points, in
 * order (point.rs `inputs`). A view into the table: an entry is an input only where
 * input_ok() holds (the clamp is applied lazily so no list is built per task). */
struct inputs {
    const int64_t *v;
    size_t n;
    int64_t lo, hi; /* keep points in [lo, hi) */
};

static struct inputs inputs_of(const struct graph *g, const struct dep_table *d, int64_t t, int64_t x)
{
    struct inputs in = {0};
    if (t == 0)
        return in;
    size_t k = (size_t)(dset_at(g, t) * g->width + x);
    in.v = d->pts.v + d->start[k];
    in.n = d->start[k + 1] - d->start[k];
    in.lo = offset_at(g, t - 1);
    in.hi = in.lo + width_at(g, t - 1);
    return in;
}

static int input_ok(const struct inputs *in, size_t i) { return in->v[i] >= in->lo && in->v[i] < in->hi; }

/* graph.rs `check`, for the patterns implemented here: a message and 0 when the graph is
 * one Task Bench would reject (or divide by zero on). */
static int check_graph(const struct graph *g)
{
    const char *name = PATTERN_NAMES[g->dep];
    if (needs_period(g->dep) && g->period == 0) {
        fprintf(stderr, "taskbench-starpu: pattern `%s` requires a non-zero period (-period)\n", name);
        return 0;
    }
    if (!needs_period(g->dep) && g->period != 0) {
        fprintf(stderr, "taskbench-starpu: pattern `%s` does not take -period: drop it\n", name);
        return 0;
    }
    if (g->dep == P_SPREAD) {
        if (g->radix == 0) {
            fprintf(stderr, "taskbench-starpu: pattern `spread` needs -radix >= 1\n");
            return 0;
        }
        int64_t spread = (g->width + g->radix - 1) / g->radix;
        if (g->period > spread) {
            fprintf(stderr,
                    "taskbench-starpu: pattern `spread` requires a period of at most %" PRId64
                    " (ceil(width / radix)); got -period %" PRId64 "\n",
                    spread, g->period);
            return 0;
        }
    }
    if (g->dep == P_FFT && g->width < 2) {
        fprintf(stderr, "taskbench-starpu: pattern `fft` needs -width >= 2\n");
        return 0;
    }
    if (g->fields < 2 && g->steps > 1) {
        fprintf(stderr,
                "taskbench-starpu: -field %" PRId64
                " would make a task read and write the same handle: use -field >= 2\n",
                g->fields);
        return 0;
    }
    /* Task Bench asserts no point depends twice on one point: a duplicate would also
     * hand StarPU the same handle twice in one task. */
    struct dep_table d;
    dep_table_build(g, &d);
    int ok = 1;
    for (int64_t k = 0; ok && k < max64(max_dsets(g), 1) * g->width; k++)
        for (size_t i = d.start[k]; ok && i < d.start[k + 1]; i++)
            for (size_t j = d.start[k]; j < i; j++)
                if (d.pts.v[i] == d.pts.v[j]) {
                    fprintf(stderr,
                            "taskbench-starpu: point %" PRId64 " depends twice on point %" PRId64
                            " (dependence set %" PRId64 "): the parameters make `%s` degenerate\n",
                            k % g->width, d.pts.v[i], k / g->width, name);
                    ok = 0;
                    break;
                }
    free(d.pts.v);
    free(d.start);
    return ok;
}

/* ---------------------------------------------------------------------------------- */
/* The kernel: kernel.rs `compute_bound`.                                               */

/* Where each worker leaves its kernel's result: an external global, so the compiler
 * must perform the FMAs (the output buffer holds Task Bench's (t, x) pairs, which
 * dependents check, so the result cannot go there). Padded to a cache line per worker. */
double tb_sink[STARPU_NMAXWORKERS * 8];

/* 2 * 64 * iter + 64 FLOPs: 16 independent chains of 256-bit FMAs a = a * a + a (the
 * 16 accumulators fill the 16 ymm registers), then the product of the 64 lanes. */
static double compute_bound(int64_t iter)
{
#if defined(__AVX2__) && defined(__FMA__)
    __m256d a[16];
    for (int j = 0; j < 16; j++)
        a[j] = _mm256_set_pd(1.0, 2.0, 3.0, 4.0);
    for (int64_t i = 0; i < iter; i++)
        for (int j = 0; j < 16; j++)
            a[j] = _mm256_fmadd_pd(a[j], a[j], a[j]);
    double lanes[64];
    for (int j = 0; j < 16; j++)
        _mm256_storeu_pd(lanes + 4 * j, a[j]);
#else
    /* Task Bench's fallback without AVX: 64 scalar chains (built without -mavx2 -mfma). */
    double lanes[64];
    for (int j = 0; j < 64; j++)
        lanes[j] = 1.2345;
    for (int64_t i = 0; i < iter; i++)
        for (int j = 0; j < 64; j++)
            lanes[j] = lanes[j] * lanes[j] + lanes[j];
#endif
    double p = 1.0;
    for (int j = 0; j < 64; j++)
        p *= lanes[j];
    return p;
}

static int64_t flops_per_task(const struct graph *g)
{
    return g->kernel == K_COMPUTE_BOUND ? 2 * 64 * g->iter + 64 : 0;
}

/* ---------------------------------------------------------------------------------- */
/* Tasks: point.rs `execute_point`.                                                     */

/* splitmix64's finaliser, as point.rs `mix`. */
static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t v, unsigned r) { return (v << r) | (v >> (64 - r)); }

/* What every task shares (read-only during the run, except each task's own slot). */
static struct graph G;
static struct dep_table DEPS;
/* slots[t * width + x]: the hash of task (t, x) (0 until it runs). A task reads the
 * slots of its inputs: StarPU orders it after their writers through the handles, so
 * the plain loads see the stores (relaxed atomics keep the compiler honest). */
static uint64_t *SLOTS;

/* The cl_arg of task (t, x), preallocated before the timer. */
struct point_arg {
    int64_t t, x;
};

/* buffers[0]: the output handle (W); buffers[1 + i]: input i, in dependency order (R).
 * Checks every input holds Task Bench's (t - 1, dep) pairs, fills the output with
 * (t, x), chains the hash, runs the kernel. */
static void point_cpu(void *buffers[], void *cl_arg)
{
    const struct point_arg *a = cl_arg;
    const int64_t t = a->t, x = a->x;
    const size_t pairs = (size_t)(G.output_bytes / 16);
    uint64_t h = mix(mix(mix(0 /* graph index */) ^ (uint64_t)t) ^ (uint64_t)x);

    struct inputs in = inputs_of(&G, &DEPS, t, x);
    unsigned b = 1;
    for (size_t i = 0; i < in.n; i++) {
        if (!input_ok(&in, i))
            continue;
        int64_t dep = in.v[i];
        const int64_t *p = (const int64_t *)STARPU_VARIABLE_GET_PTR(buffers[b++]);
        for (size_t k = 0; k < pairs; k++)
            if (p[2 * k] != t - 1 || p[2 * k + 1] != dep) {
                fprintf(stderr,
                        "taskbench-starpu: corrupted value in task (timestep %" PRId64
                        " point %" PRId64 "): input from point %" PRId64
                        " holds (timestep %" PRId64 ", point %" PRId64 "), expected (timestep %" PRId64
                        ", point %" PRId64 ")\n",
                        t, x, dep, p[2 * k], p[2 * k + 1], t - 1, dep);
                abort();
            }
        uint64_t ih = __atomic_load_n(&SLOTS[(t - 1) * G.width + dep], __ATOMIC_RELAXED);
        h = mix(rotl(h, 17) ^ ih);
    }

    int64_t *out = (int64_t *)STARPU_VARIABLE_GET_PTR(buffers[0]);
    for (size_t k = 0; k < pairs; k++) {
        out[2 * k] = t;
        out[2 * k + 1] = x;
    }
    __atomic_store_n(&SLOTS[t * G.width + x], h | 1, __ATOMIC_RELAXED);

    if (G.kernel == K_COMPUTE_BOUND) {
        int w = starpu_worker_get_id();
        tb_sink[(w < 0 ? 0 : w) * 8] = compute_bound(G.iter);
    }
}

static struct starpu_codelet POINT_CL = {
    .where = STARPU_CPU,
    .cpu_funcs = {point_cpu},
    .cpu_funcs_name = {"point_cpu"},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .name = "tb_point",
};

/* ---------------------------------------------------------------------------------- */
/* The command line and the report: app.rs.                                             */

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: taskbench-starpu -steps S -width W -type PATTERN -kernel KERNEL -iter N\n"
            "                        -core C [-output BYTES] [-field F] [-radix R] [-period P]\n"
            "  -steps S      height of the task graph (> 0)\n"
            "  -width W      width of the task graph (> 0)\n"
            "  -type PATTERN trivial no_comm stencil_1d stencil_1d_periodic dom tree fft\n"
            "                all_to_all nearest spread\n"
            "  -kernel K     empty compute_bound\n"
            "  -iter N       kernel iterations (>= 0)\n"
            "  -core C       StarPU CPU workers (conf.ncpus; wins over STARPU_NCPU)\n"
            "  -worker C     same as -core (taskwatt's name)\n"
            "  -output B     output bytes per task (>= 16, default 16)\n"
            "  -field F      rows of data handles (default: steps)\n"
            "  -radix R      dependencies per point for nearest/spread (default 3)\n"
            "  -period P     dependence sets for spread (default 3)\n");
}

static int64_t parse_int(const char *flag, const char *v, int64_t min)
{
    char *end;
    errno = 0;
    long long n = v ? strtoll(v, &end, 10) : 0;
    if (!v || errno || *end || end == v || n < min) {
        fprintf(stderr, "taskbench-starpu: %s %s: must be an integer >= %" PRId64 "\n", flag,
                v ? v : "(missing)", min);
        exit(EXIT_USAGE);
    }
    return (int64_t)n;
}

static void display(const struct graph *g)
{
    printf("Running Task Benchmark\n  Configuration:\n    Task Graph 1:\n");
    printf("      Time Steps: %" PRId64 "\n      Max Width: %" PRId64 "\n", g->steps, g->width);
    printf("      Dependence Type: %s\n      Radix: %" PRId64 "\n      Period: %" PRId64 "\n",
           PATTERN_NAMES[g->dep], g->radix, g->period);
    printf("      Fraction Connected: %f\n      Kernel:\n", 0.25);
    printf("        Type: %s\n        Iterations: %" PRId64 "\n",
           g->kernel == K_EMPTY ? "empty" : "compute_bound", g->iter);
    printf("        Samples: 16\n        Imbalance: %f\n", 0.0);
    printf("      Output Bytes: %" PRId64 "\n      Scratch Bytes: 0\n", g->output_bytes);
}

/* app.rs `report_timing` with -nodes 0, line for line. */
static void report_timing(const struct graph *g, const struct dep_table *d, double elapsed)
{
    int64_t tasks = 0, deps = 0, flops = 0, bytes = 0;
    for (int64_t t = 0; t < g->steps; t++) {
        int64_t off = offset_at(g, t), w = width_at(g, t);
        tasks += w;
        for (int64_t x = off; x < off + w; x++) {
            struct inputs in = inputs_of(g, d, t, x);
            for (size_t i = 0; i < in.n; i++)
                deps += input_ok(&in, i);
            flops += flops_per_task(g);
        }
    }
    printf("Total Tasks %" PRId64 "\n", tasks);
    printf("Total Dependencies %" PRId64 "\n", deps);
    printf("  Unable to estimate local/nonlocal dependencies\n");
    printf("Total FLOPs %" PRId64 "\n", flops);
    printf("Total Bytes %" PRId64 "\n", bytes);
    printf("Elapsed Time %e seconds\n", elapsed);
    printf("FLOP/s %e\n", (double)flops / elapsed);
    printf("B/s %e\n", (double)bytes / elapsed);
    printf("Transfer (estimated):\n  Unable to estimate local/nonlocal transfer\n");
}

int main(int argc, char **argv)
{
    struct graph *g = &G;
    *g = (struct graph){.steps = 4, .width = 4, .radix = 3, .period = -1, .fields = 0,
                        .iter = 0, .output_bytes = 16, .dep = P_TRIVIAL, .kernel = K_EMPTY};
    int64_t cores = -1;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(f, "-steps")) {
            g->steps = parse_int(f, v, 1), i++;
        } else if (!strcmp(f, "-width")) {
            g->width = parse_int(f, v, 1), i++;
        } else if (!strcmp(f, "-iter")) {
            g->iter = parse_int(f, v, 0), i++;
        } else if (!strcmp(f, "-core") || !strcmp(f, "-worker")) {
            cores = parse_int(f, v, 1), i++;
            if (cores > STARPU_NMAXWORKERS) {
                fprintf(stderr, "taskbench-starpu: %s %" PRId64 ": this StarPU build has at most %d workers\n",
                        f, cores, STARPU_NMAXWORKERS);
                return EXIT_USAGE;
            }
        } else if (!strcmp(f, "-output")) {
            g->output_bytes = parse_int(f, v, 16), i++;
        } else if (!strcmp(f, "-field")) {
            g->fields = parse_int(f, v, 1), i++;
        } else if (!strcmp(f, "-radix")) {
            g->radix = parse_int(f, v, 0), i++;
        } else if (!strcmp(f, "-period")) {
            g->period = parse_int(f, v, 0), i++;
        } else if (!strcmp(f, "-type")) {
            int k = P_COUNT;
            for (int p = 0; v && p < P_COUNT; p++)
                if (!strcmp(v, PATTERN_NAMES[p]))
                    k = p;
            if (k == P_COUNT) {
                fprintf(stderr, "taskbench-starpu: -type %s: %s; valid: trivial no_comm stencil_1d "
                                "stencil_1d_periodic dom tree fft all_to_all nearest spread\n",
                        v ? v : "(missing)",
                        v && !strcmp(v, "random_nearest") ? "not implemented by this driver"
                                                          : "unknown pattern");
                return EXIT_USAGE;
            }
            g->dep = (enum pattern)k, i++;
        } else if (!strcmp(f, "-kernel")) {
            if (v && !strcmp(v, "empty"))
                g->kernel = K_EMPTY;
            else if (v && !strcmp(v, "compute_bound"))
                g->kernel = K_COMPUTE_BOUND;
            else {
                fprintf(stderr, "taskbench-starpu: -kernel %s: not supported by this driver; valid: "
                                "empty compute_bound\n",
                        v ? v : "(missing)");
                return EXIT_USAGE;
            }
            i++;
        } else {
            fprintf(stderr, "taskbench-starpu: unknown flag %s\n", f);
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    /* TaskGraph::finish: Task Bench's defaults, then its checks. */
    if (g->period < 0)
        g->period = needs_period(g->dep) ? 3 : 0;
    if (g->fields == 0)
        g->fields = g->steps;
    if (!check_graph(g))
        return EXIT_USAGE;
    dep_table_build(g, &DEPS);

    struct starpu_conf conf;
    starpu_conf_init(&conf);
    conf.ncuda = 0;
    conf.nopencl = 0;
    conf.nmic = 0;
    conf.nmpi_ms = 0;
    if (cores > 0) {
        conf.ncpus = (int)cores;
        /* -core is the sweep's worker count: it must win over a stray STARPU_NCPU. */
        conf.precedence_over_environment_variables = 1;
    }
    int ret = starpu_init(&conf);
    if (ret != 0) {
        fprintf(stderr, "taskbench-starpu: starpu_init failed: %s (%d)\n", strerror(-ret), ret);
        return EXIT_RUNTIME;
    }
    unsigned nworkers = starpu_cpu_worker_get_count();
    if (cores > 0 && nworkers != (unsigned)cores)
        fprintf(stderr, "taskbench-starpu: warning: asked for %" PRId64 " CPU workers, StarPU started %u\n",
                cores, nworkers);

    /* Data and task arguments, all before the timer (as Task Bench). */
    const size_t nh = (size_t)(g->fields * g->width);
    const size_t ntasks = (size_t)(g->steps * g->width);
    const size_t ob = (size_t)g->output_bytes;
    char *data = aligned_alloc(64, (nh * ob + 63) / 64 * 64);
    starpu_data_handle_t *handles = malloc(nh * sizeof *handles);
    struct point_arg *args = malloc(ntasks * sizeof *args);
    SLOTS = calloc(ntasks, sizeof *SLOTS);
    size_t max_in = 0;
    for (size_t k = 0; k + 1 <= (size_t)(max64(max_dsets(g), 1) * g->width); k++)
        max_in = DEPS.start[k + 1] - DEPS.start[k] > max_in ? DEPS.start[k + 1] - DEPS.start[k] : max_in;
    struct starpu_data_descr *descr = malloc((max_in + 1) * sizeof *descr);
    if (!data || !handles || !args || !SLOTS || !descr) {
        fprintf(stderr, "taskbench-starpu: out of memory for %zu handles of %zu bytes\n", nh, ob);
        return EXIT_RUNTIME;
    }
    memset(data, 0xff, nh * ob); /* (-1, -1) pairs: no task writes them */
    for (size_t i = 0; i < nh; i++)
        starpu_variable_data_register(&handles[i], STARPU_MAIN_RAM, (uintptr_t)(data + i * ob), ob);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int64_t t = 0; t < g->steps; t++) {
        const int64_t off = offset_at(g, t), w = width_at(g, t);
        const size_t row = (size_t)((t % g->fields) * g->width);
        const size_t prev = t > 0 ? (size_t)(((t - 1) % g->fields) * g->width) : 0;
        for (int64_t x = off; x < off + w; x++) {
            struct inputs in = inputs_of(g, &DEPS, t, x);
            int n = 0;
            descr[n++] = (struct starpu_data_descr){handles[row + (size_t)x], STARPU_W};
            for (size_t i = 0; i < in.n; i++)
                if (input_ok(&in, i))
                    descr[n++] = (struct starpu_data_descr){handles[prev + (size_t)in.v[i]], STARPU_R};
            struct point_arg *a = &args[t * g->width + x];
            a->t = t;
            a->x = x;
            ret = starpu_task_insert(&POINT_CL, STARPU_DATA_MODE_ARRAY, descr, n,
                                     STARPU_CL_ARGS_NFREE, a, sizeof *a, 0);
            if (ret != 0) {
                fprintf(stderr, "taskbench-starpu: starpu_task_insert failed for task (%" PRId64
                                ", %" PRId64 "): %d\n", t, x, ret);
                return EXIT_RUNTIME;
            }
        }
    }
    starpu_task_wait_for_all();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double elapsed = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);

    for (size_t i = 0; i < nh; i++)
        starpu_data_unregister(handles[i]);
    struct starpu_sched_policy *pol = starpu_sched_ctx_get_sched_policy(0 /* the initial context */);
    const char *sched = pol && pol->policy_name ? pol->policy_name : "?";

    display(g);
    report_timing(g, &DEPS, elapsed);

    /* point.rs Checksums::finish then combine() over the one graph. */
    uint64_t sum = 0, executed = 0;
    for (size_t i = 0; i < ntasks; i++) {
        executed += SLOTS[i] != 0;
        sum = mix(rotl(sum, 5) ^ SLOTS[i]);
    }
    printf("System starpu/%s (%u workers)\n", sched, nworkers);
    printf("Tasks Executed %" PRIu64 "\n", executed);
    printf("Checksum %016" PRIx64 "\n", mix(0 ^ sum));
    starpu_shutdown();
    return 0;
}

// CUDA casts: the per-element code of cast_bits.h (so results equal
// tc_cast_ref bit for bit), one kernel instance per pair, fed through pinned
// staging buffers in chunks on two streams so copies overlap kernels.
#include "cast_cuda.h"
#include "cast_bits.h"

#include <cuda_runtime.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace {

template <int D, int S, typename TD, typename TS>
__global__ void cast_kernel(TD *__restrict__ dst, const TS *__restrict__ src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = (TD)tcb_cast1(D, S, src[i]);
}

typedef void (*launcher)(void *dst, const void *src, size_t n, int blocks, cudaStream_t s);

template <int D, int S, typename TD, typename TS>
void launch(void *dst, const void *src, size_t n, int blocks, cudaStream_t s)
{
    cast_kernel<D, S, TD, TS><<<blocks, 256, 0, s>>>((TD *)dst, (const TS *)src, n);
}

// Element type of each cast dtype, by tc_dtype value.
template <int T> struct Elem;
template <> struct Elem<TCB_F64> { typedef uint64_t T; };
template <> struct Elem<TCB_F32> { typedef uint32_t T; };
template <> struct Elem<TCB_F16> { typedef uint16_t T; };
template <> struct Elem<TCB_BF16> { typedef uint16_t T; };
template <> struct Elem<TCB_E4M3> { typedef uint8_t T; };
template <> struct Elem<TCB_E5M2> { typedef uint8_t T; };

template <int D, int S> launcher L() { return launch<D, S, typename Elem<D>::T, typename Elem<S>::T>; }

template <int S> launcher pick_dst(int d)
{
    switch (d) {
    case TCB_F64: return L<TCB_F64, S>();
    case TCB_F32: return L<TCB_F32, S>();
    case TCB_F16: return L<TCB_F16, S>();
    case TCB_BF16: return L<TCB_BF16, S>();
    case TCB_E4M3: return L<TCB_E4M3, S>();
    case TCB_E5M2: return L<TCB_E5M2, S>();
    default: return NULL;
    }
}

launcher pick(int d, int s)
{
    if (d == s)
        return NULL;
    switch (s) {
    case TCB_F64: return pick_dst<TCB_F64>(d);
    case TCB_F32: return pick_dst<TCB_F32>(d);
    case TCB_F16: return pick_dst<TCB_F16>(d);
    case TCB_BF16: return pick_dst<TCB_BF16>(d);
    case TCB_E4M3: return pick_dst<TCB_E4M3>(d);
    case TCB_E5M2: return pick_dst<TCB_E5M2>(d);
    default: return NULL;
    }
}

size_t esize(int t)
{
    switch (t) {
    case TCB_F64: return 8;
    case TCB_F32: return 4;
    case TCB_F16: case TCB_BF16: return 2;
    case TCB_E4M3: case TCB_E5M2: return 1;
    default: return 0;
    }
}

__attribute__((format(printf, 3, 4))) void put(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (why && len)
        vsnprintf(why, len, fmt, ap);
    va_end(ap);
}

} // namespace

extern "C" void tc_cuda_query(tc_cuda_info *out)
{
    memset(out, 0, sizeof *out);
    out->compiled = true;
    cudaRuntimeGetVersion(&out->runtime_version);
    if (cudaDriverGetVersion(&out->driver_version) != cudaSuccess)
        out->driver_version = 0;
    int count = 0; // cudaGetDeviceCount leaves it unwritten on failure
    cudaError_t err = cudaGetDeviceCount(&count);
    cudaGetLastError(); // do not leave the error sticky for later calls
    out->count = err == cudaSuccess ? count : 0;
    out->available = out->count > 0;
    if (out->available)
        return;
    if (err == cudaSuccess || err == cudaErrorNoDevice)
        snprintf(out->why, sizeof out->why, "no CUDA device");
    else if (out->driver_version == 0)
        snprintf(out->why, sizeof out->why, "no NVIDIA driver");
    else if (err == cudaErrorInsufficientDriver)
        snprintf(out->why, sizeof out->why,
                 "NVIDIA driver too old for this CUDA runtime (driver supports CUDA %d.%d, runtime is %d.%d)",
                 out->driver_version / 1000, out->driver_version % 1000 / 10, out->runtime_version / 1000,
                 out->runtime_version % 1000 / 10);
    else
        snprintf(out->why, sizeof out->why, "CUDA unusable: %s", cudaGetErrorString(err));
}

extern "C" int tc_cuda_device_get(tc_cuda_device *out, int idx)
{
    tc_cuda_info info;
    tc_cuda_query(&info);
    cudaDeviceProp p;
    if (idx < 0 || idx >= info.count || cudaGetDeviceProperties(&p, idx) != cudaSuccess)
        return -1;
    tc_cuda_device d;
    memset(&d, 0, sizeof d);
    d.index = idx;
    snprintf(d.name, sizeof d.name, "%s", p.name);
    d.total_mem = p.totalGlobalMem;
    d.cc_major = p.major;
    d.cc_minor = p.minor;
    size_t fr = 0, tot = 0;
    int prev = 0;
    // free memory needs a context on idx; restore the caller's device after
    if (cudaGetDevice(&prev) == cudaSuccess && cudaSetDevice(idx) == cudaSuccess &&
        cudaMemGetInfo(&fr, &tot) == cudaSuccess)
        d.free_mem = fr;
    cudaSetDevice(prev);
    cudaGetLastError();
    *out = d;
    return 0;
}

// A staging buffer: the larger side (input or output) of one sub-chunk. Two
// streams, each with a pinned input and output buffer and a device input and
// output buffer: 16 MiB pinned and 16 MiB on the device in all.
#define SUB_BYTES ((size_t)4 << 20)

struct tc_cuda_caster {
    int dev, sms;
    cudaStream_t st[2];
    void *hin[2], *hout[2], *din[2], *dout[2];
};

namespace {

// Make dev current for the life of the object; the caller's device is
// restored after (CUDA's current device is per thread, and ours is not the
// only code that may set it).
struct on_device {
    int prev;
    cudaError_t err;
    explicit on_device(int dev) : prev(0)
    {
        cudaGetDevice(&prev);
        err = cudaSetDevice(dev);
    }
    ~on_device()
    {
        cudaSetDevice(prev);
        cudaGetLastError(); // leave no sticky error to the next call
    }
};

// false, with the reason in why, unless dev is a usable device
bool usable(int dev, char *why, size_t why_len)
{
    tc_cuda_info info;
    tc_cuda_query(&info);
    if (info.available && dev >= 0 && dev < info.count)
        return true;
    put(why, why_len, "%s", info.available ? "no such CUDA device" : info.why);
    return false;
}

// Blocks for n elements: one thread each, grid-stride beyond 32 blocks per SM.
int grid(size_t n, int sms)
{
    size_t blocks = (n + 255) / 256, most = (size_t)sms * 32;
    return (int)(blocks < most ? blocks : most);
}

void release(tc_cuda_caster *c)
{
    for (int k = 0; k < 2; k++) {
        if (c->st[k]) {
            cudaStreamSynchronize(c->st[k]);
            cudaStreamDestroy(c->st[k]);
        }
        if (c->hin[k])
            cudaFreeHost(c->hin[k]);
        if (c->hout[k])
            cudaFreeHost(c->hout[k]);
        if (c->din[k])
            cudaFree(c->din[k]);
        if (c->dout[k])
            cudaFree(c->dout[k]);
    }
}

} // namespace

extern "C" tc_cuda_caster *tc_cuda_caster_new(int dev, char *why, size_t why_len)
{
    if (!usable(dev, why, why_len))
        return NULL;
    tc_cuda_caster *c = (tc_cuda_caster *)calloc(1, sizeof *c);
    if (!c) {
        put(why, why_len, "out of memory");
        return NULL;
    }
    c->dev = dev;
    on_device on(dev);
    cudaError_t e = on.err;
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&c->sms, cudaDevAttrMultiProcessorCount, dev);
    for (int k = 0; k < 2 && e == cudaSuccess; k++) {
        e = cudaStreamCreateWithFlags(&c->st[k], cudaStreamNonBlocking);
        if (e == cudaSuccess)
            e = cudaMallocHost(&c->hin[k], SUB_BYTES);
        if (e == cudaSuccess)
            e = cudaMallocHost(&c->hout[k], SUB_BYTES);
        if (e == cudaSuccess)
            e = cudaMalloc(&c->din[k], SUB_BYTES);
        if (e == cudaSuccess)
            e = cudaMalloc(&c->dout[k], SUB_BYTES);
    }
    if (e != cudaSuccess) {
        put(why, why_len, "CUDA setup on device %d failed: %s", dev, cudaGetErrorString(e));
        release(c);
        free(c);
        return NULL;
    }
    return c;
}

extern "C" void tc_cuda_caster_free(tc_cuda_caster *c)
{
    if (!c)
        return;
    {
        on_device on(c->dev);
        release(c);
    }
    free(c);
}

extern "C" int tc_cuda_caster_run(tc_cuda_caster *c, tc_dtype dst_t, void *dst, tc_dtype src_t, const void *src,
                                  size_t n, char *why, size_t why_len)
{
    size_t ds = esize(dst_t), ss = esize(src_t);
    if (!ds || !ss) {
        put(why, why_len, "unsupported cast %d -> %d", (int)src_t, (int)dst_t);
        return -1;
    }
    if (n == 0)
        return 0;
    if (dst_t == src_t) {
        memcpy(dst, src, n * ss);
        return 0;
    }
    launcher run = pick(dst_t, src_t);
    on_device on(c->dev);
    cudaError_t e = on.err;
    size_t len[2] = {0, 0}, off[2] = {0, 0};
    size_t chunk = SUB_BYTES / (ds > ss ? ds : ss);
    // Sub-chunk i runs on stream i % 2. Before reusing a stream's buffers,
    // wait for its previous sub-chunk and drain its output; meanwhile the
    // other stream's copies and kernel are in flight.
    for (size_t pos = 0, i = 0; e == cudaSuccess && (pos < n || len[0] || len[1]); i++) {
        int k = (int)(i & 1);
        if (len[k]) {
            if ((e = cudaStreamSynchronize(c->st[k])) != cudaSuccess)
                break;
            memcpy((char *)dst + off[k] * ds, c->hout[k], len[k] * ds);
            len[k] = 0;
        }
        if (pos >= n)
            continue;
        size_t m = n - pos < chunk ? n - pos : chunk;
        memcpy(c->hin[k], (const char *)src + pos * ss, m * ss);
        if ((e = cudaMemcpyAsync(c->din[k], c->hin[k], m * ss, cudaMemcpyHostToDevice, c->st[k])) != cudaSuccess)
            break;
        run(c->dout[k], c->din[k], m, grid(m, c->sms), c->st[k]);
        if ((e = cudaGetLastError()) != cudaSuccess ||
            (e = cudaMemcpyAsync(c->hout[k], c->dout[k], m * ds, cudaMemcpyDeviceToHost, c->st[k])) != cudaSuccess)
            break;
        len[k] = m;
        off[k] = pos;
        pos += m;
    }
    if (e == cudaSuccess)
        return 0;
    put(why, why_len, "CUDA cast failed: %s", cudaGetErrorString(e));
    for (int k = 0; k < 2; k++) // nothing may still be using the buffers
        cudaStreamSynchronize(c->st[k]);
    return -1;
}

extern "C" int tc_cuda_cast(int dev, tc_dtype dst_t, void *dst, tc_dtype src_t, const void *src, size_t n,
                            char *why, size_t why_len)
{
    if (!esize(dst_t) || !esize(src_t)) {
        put(why, why_len, "unsupported cast %d -> %d", (int)src_t, (int)dst_t);
        return -1;
    }
    tc_cuda_caster *c = tc_cuda_caster_new(dev, why, why_len);
    if (!c)
        return -1;
    int rc = tc_cuda_caster_run(c, dst_t, dst, src_t, src, n, why, why_len);
    tc_cuda_caster_free(c);
    return rc;
}

extern "C" int tc_cuda_measure(int dev, tc_dtype dst_t, tc_dtype src_t, size_t n, int reps, double *kernel_s,
                               double *copy_s, char *why, size_t why_len)
{
    size_t ds = esize(dst_t), ss = esize(src_t);
    launcher run = ds && ss ? pick(dst_t, src_t) : NULL;
    if (!run || n == 0 || reps < 1) {
        put(why, why_len, "nothing to measure");
        return -1;
    }
    if (!usable(dev, why, why_len))
        return -1;
    on_device on(dev);
    cudaError_t e = on.err;
    void *a = NULL, *b = NULL;
    cudaEvent_t t0 = NULL, t1 = NULL;
    int sms = 0;
    float ms = 0;
    size_t big = (ds > ss ? ds : ss) * n;
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess)
        e = cudaMalloc(&a, big);
    if (e == cudaSuccess)
        e = cudaMalloc(&b, big);
    if (e == cudaSuccess)
        e = cudaMemset(a, 0x3c, big);
    if (e == cudaSuccess)
        e = cudaEventCreate(&t0);
    if (e == cudaSuccess)
        e = cudaEventCreate(&t1);
    int blocks = grid(n, sms);
    // the kernel: reps casts of n elements after one warm-up
    if (e == cudaSuccess) {
        run(b, a, n, blocks, 0);
        cudaEventRecord(t0, 0);
        for (int r = 0; r < reps; r++)
            run(b, a, n, blocks, 0);
        cudaEventRecord(t1, 0);
        if ((e = cudaGetLastError()) == cudaSuccess && (e = cudaEventSynchronize(t1)) == cudaSuccess &&
            (e = cudaEventElapsedTime(&ms, t0, t1)) == cudaSuccess)
            *kernel_s = ms / 1e3 / reps;
    }
    // the device's own copy of as many bytes as the cast reads and writes
    if (e == cudaSuccess) {
        size_t bytes = (n * ss + n * ds) / 2;
        cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0);
        cudaEventRecord(t0, 0);
        for (int r = 0; r < reps; r++)
            cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0);
        cudaEventRecord(t1, 0);
        if ((e = cudaGetLastError()) == cudaSuccess && (e = cudaEventSynchronize(t1)) == cudaSuccess &&
            (e = cudaEventElapsedTime(&ms, t0, t1)) == cudaSuccess)
            *copy_s = ms / 1e3 / reps;
    }
    if (e != cudaSuccess)
        put(why, why_len, "CUDA measurement failed: %s", cudaGetErrorString(e));
    if (t0)
        cudaEventDestroy(t0);
    if (t1)
        cudaEventDestroy(t1);
    cudaFree(a);
    cudaFree(b);
    return e == cudaSuccess ? 0 : -1;
}

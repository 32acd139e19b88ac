// CUDA casts: the per-element code of cast_bits.h (so results equal
// tc_cast_ref bit for bit), one kernel instance per pair, fed through pinned
// staging buffers in chunks on two streams so copies overlap kernels.
#include "cast_cuda.h"
#include "cast_bits.h"

#include <cuda_runtime.h>
#include <stdarg.h>
#include <stdio.h>
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

// Elements per chunk: 4 Mi, i.e. at most 32 MiB per buffer for float64.
#define CHUNK ((size_t)4 << 20)

extern "C" int tc_cuda_cast(int dev, tc_dtype dst_t, void *dst, tc_dtype src_t, const void *src, size_t n,
                            char *why, size_t why_len)
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
    tc_cuda_info info;
    tc_cuda_query(&info);
    if (!info.available || dev < 0 || dev >= info.count) {
        put(why, why_len, "%s", info.available ? "no such CUDA device" : info.why);
        return -1;
    }
    int prev = 0, sms = 0, rc = -1;
    cudaGetDevice(&prev);
    cudaStream_t st[2] = {0, 0};
    void *hin[2] = {0, 0}, *hout[2] = {0, 0}, *din[2] = {0, 0}, *dout[2] = {0, 0};
    size_t len[2] = {0, 0}, off[2] = {0, 0};
    size_t chunk = n < CHUNK ? n : CHUNK;
    cudaError_t e = cudaSetDevice(dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    for (int k = 0; k < 2 && e == cudaSuccess; k++) {
        e = cudaStreamCreateWithFlags(&st[k], cudaStreamNonBlocking);
        if (e == cudaSuccess)
            e = cudaMallocHost(&hin[k], chunk * ss);
        if (e == cudaSuccess)
            e = cudaMallocHost(&hout[k], chunk * ds);
        if (e == cudaSuccess)
            e = cudaMalloc(&din[k], chunk * ss);
        if (e == cudaSuccess)
            e = cudaMalloc(&dout[k], chunk * ds);
    }
    if (e != cudaSuccess)
        goto done;
    // Chunk c runs on stream c % 2. Before reusing a stream's buffers, wait
    // for its previous chunk and drain its output; meanwhile the other
    // stream's copies and kernel are in flight.
    for (size_t pos = 0, c = 0; pos < n || len[0] || len[1]; c++) {
        int k = (int)(c & 1);
        if (len[k]) {
            if ((e = cudaStreamSynchronize(st[k])) != cudaSuccess)
                goto done;
            memcpy((char *)dst + off[k] * ds, hout[k], len[k] * ds);
            len[k] = 0;
        }
        if (pos >= n)
            continue;
        size_t m = n - pos < chunk ? n - pos : chunk;
        memcpy(hin[k], (const char *)src + pos * ss, m * ss);
        int blocks = (int)((m + 255) / 256);
        if (blocks > sms * 32)
            blocks = sms * 32;
        if ((e = cudaMemcpyAsync(din[k], hin[k], m * ss, cudaMemcpyHostToDevice, st[k])) != cudaSuccess)
            goto done;
        run(dout[k], din[k], m, blocks, st[k]);
        if ((e = cudaGetLastError()) != cudaSuccess ||
            (e = cudaMemcpyAsync(hout[k], dout[k], m * ds, cudaMemcpyDeviceToHost, st[k])) != cudaSuccess)
            goto done;
        len[k] = m;
        off[k] = pos;
        pos += m;
    }
    rc = 0;
done:
    if (rc)
        put(why, why_len, "CUDA cast failed: %s", cudaGetErrorString(e));
    for (int k = 0; k < 2; k++) {
        if (st[k])
            cudaStreamSynchronize(st[k]);
        if (st[k])
            cudaStreamDestroy(st[k]);
        cudaFreeHost(hin[k]);
        cudaFreeHost(hout[k]);
        cudaFree(din[k]);
        cudaFree(dout[k]);
    }
    cudaGetLastError();
    cudaSetDevice(prev);
    return rc;
}

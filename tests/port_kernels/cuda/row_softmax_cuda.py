import torch
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void row_softmax(const float* x, float* y, int cols) {
    int row = blockIdx.x;
    extern __shared__ float buf[];
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, x[row * cols + c]);
    buf[threadIdx.x] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] = fmaxf(buf[threadIdx.x], buf[threadIdx.x + s]);
        __syncthreads();
    }
    m = buf[0];
    __syncthreads();
    float total = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) total += expf(x[row * cols + c] - m);
    buf[threadIdx.x] = total;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    total = buf[0];
    for (int c = threadIdx.x; c < cols; c += blockDim.x) y[row * cols + c] = expf(x[row * cols + c] - m) / total;
}

torch::Tensor softmax_rows(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int threads = 128;
    row_softmax<<<x.size(0), threads, threads * sizeof(float)>>>(x.data_ptr<float>(), y.data_ptr<float>(),
                                                                 x.size(1));
    return y;
}
"""

_ext = load_inline("row_softmax_cuda", cpp_sources="torch::Tensor softmax_rows(torch::Tensor x);",
                   cuda_sources=CUDA_SRC, functions=["softmax_rows"], verbose=False)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return _ext.softmax_rows(x.contiguous())


def get_inputs():
    return [torch.randn(256, 1000)]


def get_init_inputs():
    return []

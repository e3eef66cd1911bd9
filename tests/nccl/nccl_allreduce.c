// SPDX-License-Identifier: Apache-2.0
/*
 * nccl_allreduce: one rank of an NCCL all-reduce test. Rank 0 writes ncclGetUniqueId to a
 * file, the others read it (bounded wait); every rank all-reduces float buffers of
 * several sizes, verifies every element, and rank 0 prints one row per size with the
 * bus bandwidth as nccl-tests computes it (algbw * 2 (n - 1) / n).
 *
 * Which network NCCL uses is the caller's choice (NCCL_NET, NCCL_NET_PLUGIN); run.sh
 * runs it through braid and through NCCL's own Socket transport.
 */
#include <errno.h>
#include <getopt.h>
#include <string.h>

#include "tests/nccl/nccl_common.h"

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "rank", required_argument, NULL, 'r' },
		{ "nranks", required_argument, NULL, 'n' },
		{ "id-file", required_argument, NULL, 'f' },
		{ "min", required_argument, NULL, 'a' },
		{ "max", required_argument, NULL, 'b' },
		{ "iters", required_argument, NULL, 'i' },
		{ "device", required_argument, NULL, 'd' },
		{ 0 },
	};
	size_t min = 1 << 10, max = 64 << 20;
	int nranks = 2, iters = 20, warmup = 5, device = 0, ndev = 0, c, bad_total = 0;
	const char *id_file = NULL;
	ncclUniqueId id;
	ncclComm_t comm;
	cudaStream_t stream;
	float *host, *sbuf, *rbuf;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'r': rank_id = atoi(optarg); break;
		case 'n': nranks = atoi(optarg); break;
		case 'f': id_file = optarg; break;
		case 'a': min = strtoull(optarg, NULL, 0); break;
		case 'b': max = strtoull(optarg, NULL, 0); break;
		case 'i': iters = atoi(optarg); break;
		case 'd': device = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: nccl_allreduce --rank R --nranks N --id-file F "
					"[--min B] [--max B] [--iters N] [--device D]\n");
			return 2;
		}
	}
	if (rank_id < 0 || rank_id >= nranks || !id_file || min < 4 || min > max) {
		fprintf(stderr, "nccl_allreduce: need --rank in 0..nranks-1, --id-file, "
				"4 <= --min <= --max\n");
		return 2;
	}
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
		printf("SKIP: no CUDA device visible to rank %d\n", rank_id);
		return SKIP;
	}
	CUDA_CHECK(cudaSetDevice(device % ndev));
	if (rank_id == 0) {
		NCCL_CHECK(ncclGetUniqueId(&id));
		if (write_id(id_file, &id)) {
			fprintf(stderr, "rank 0: writing %s: %s\n", id_file, strerror(errno));
			return 1;
		}
	} else if (read_id(id_file, &id, 120)) {
		fprintf(stderr, "rank %d: no unique id in %s after 120 s\n", rank_id, id_file);
		return 1;
	}
	NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank_id));
	CUDA_CHECK(cudaStreamCreate(&stream));
	host = malloc(max);
	if (!host)
		return 1;
	CUDA_CHECK(cudaMalloc((void **)&sbuf, max));
	CUDA_CHECK(cudaMalloc((void **)&rbuf, max));
	if (rank_id == 0)
		printf("#%12s %12s %8s %12s %10s %10s  %s\n", "bytes", "floats", "iters",
		       "time(us)", "algbw GB/s", "busbw GB/s", "check");
	for (size_t bytes = min; bytes <= max; bytes *= 2) {
		size_t count = bytes / sizeof(float), bad = 0, first_bad = 0;
		float want_sum = 0;
		double t0, usec;

		for (size_t i = 0; i < count; i++)
			host[i] = contribution(rank_id, i);
		CUDA_CHECK(cudaMemcpy(sbuf, host, count * sizeof(float), cudaMemcpyHostToDevice));
		CUDA_CHECK(cudaMemset(rbuf, 0, count * sizeof(float)));
		for (int i = 0; i < warmup; i++)
			NCCL_CHECK(
				ncclAllReduce(sbuf, rbuf, count, ncclFloat, ncclSum, comm, stream));
		CUDA_CHECK(cudaStreamSynchronize(stream));
		t0 = now_s();
		for (int i = 0; i < iters; i++)
			NCCL_CHECK(
				ncclAllReduce(sbuf, rbuf, count, ncclFloat, ncclSum, comm, stream));
		CUDA_CHECK(cudaStreamSynchronize(stream));
		usec = (now_s() - t0) * 1e6 / iters;
		/* the send buffer is untouched by all-reduce: the last result is the sum */
		CUDA_CHECK(cudaMemcpy(host, rbuf, count * sizeof(float), cudaMemcpyDeviceToHost));
		for (size_t i = 0; i < count; i++) {
			float want = 0;

			for (int r = 0; r < nranks; r++)
				want += contribution(r, i);
			if (host[i] != want && !bad++) {
				first_bad = i;
				want_sum = want;
			}
		}
		if (bad)
			fprintf(stderr,
				"rank %d: %zu bytes: %zu wrong elements, first [%zu] = %g, "
				"expected %g\n",
				rank_id, bytes, bad, first_bad, host[first_bad], want_sum);
		bad_total += bad != 0;
		if (rank_id == 0) {
			double algbw = bytes / usec / 1e3;

			printf("%13zu %12zu %8d %12.1f %10.3f %10.3f  %s\n", bytes, count, iters,
			       usec, algbw, algbw * 2 * (nranks - 1) / nranks,
			       bad ? "WRONG" : "ok");
			fflush(stdout);
		}
	}
	NCCL_CHECK(ncclCommDestroy(comm));
	cudaFree(sbuf);
	cudaFree(rbuf);
	free(host);
	return bad_total ? 1 : 0;
}

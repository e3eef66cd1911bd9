// SPDX-License-Identifier: Apache-2.0
/*
 * nccl_abort: one rank of NCCL's abort path through the network plugin (issue 19 item 5).
 * Each round every rank makes a communicator, enqueues --inflight all-reduces of --bytes
 * (not waited for), sleeps a time of its own (0 to --spread-us, from the rank and round:
 * the ranks do not abort together), and calls ncclCommAbort with them in flight. NCCL's
 * proxy then deregisters the plugin's memory and closes its comms with requests
 * outstanding, and the peer's comms see the close while they still send and receive.
 * After the rounds, a fresh communicator all-reduces once more and every element is
 * verified: the plugin and the device still work. Rank 0 prints one line per round.
 *
 * Bounded: every id wait is; the caller bounds the whole rank (run.sh, PAIR_TIMEOUT).
 * ncclCommAbort may report an error of the aborted communicator; only a crash, a hang
 * or a wrong final result fail.
 */
#include <errno.h>
#include <getopt.h>
#include <string.h>

#include "tests/nccl/nccl_common.h"

/* Rank 0 makes the round's id and writes it to PREFIX.ROUND; the others read it. */
static int exchange_id(const char *prefix, int round, ncclUniqueId *id)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s.%d", prefix, round);
	if (rank_id == 0) {
		NCCL_CHECK(ncclGetUniqueId(id));
		if (write_id(path, id)) {
			fprintf(stderr, "rank 0: writing %s: %s\n", path, strerror(errno));
			return -1;
		}
		return 0;
	}
	if (read_id(path, id, 120)) {
		fprintf(stderr, "rank %d: no id in %s after 120 s\n", rank_id, path);
		return -1;
	}
	return 0;
}

/* A verified all-reduce of count floats on a fresh communicator: 0 when every element is
 * right. */
static int verified_allreduce(const char *prefix, int round, int nranks, size_t count)
{
	size_t bad = 0;
	ncclUniqueId id;
	ncclComm_t comm;
	cudaStream_t stream;
	float *host, *sbuf, *rbuf;

	if (exchange_id(prefix, round, &id))
		return -1;
	NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank_id));
	CUDA_CHECK(cudaStreamCreate(&stream));
	host = malloc(count * sizeof(float));
	if (!host)
		return -1;
	CUDA_CHECK(cudaMalloc((void **)&sbuf, count * sizeof(float)));
	CUDA_CHECK(cudaMalloc((void **)&rbuf, count * sizeof(float)));
	for (size_t i = 0; i < count; i++)
		host[i] = contribution(rank_id, i);
	CUDA_CHECK(cudaMemcpy(sbuf, host, count * sizeof(float), cudaMemcpyHostToDevice));
	NCCL_CHECK(ncclAllReduce(sbuf, rbuf, count, ncclFloat, ncclSum, comm, stream));
	CUDA_CHECK(cudaStreamSynchronize(stream));
	CUDA_CHECK(cudaMemcpy(host, rbuf, count * sizeof(float), cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < count; i++) {
		float want = 0;

		for (int r = 0; r < nranks; r++)
			want += contribution(r, i);
		bad += host[i] != want;
	}
	NCCL_CHECK(ncclCommDestroy(comm));
	cudaFree(sbuf);
	cudaFree(rbuf);
	cudaStreamDestroy(stream);
	free(host);
	if (bad)
		fprintf(stderr, "rank %d: the all-reduce after the aborts: %zu wrong elements\n",
			rank_id, bad);
	return bad ? -1 : 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "rank", required_argument, NULL, 'r' },
		{ "nranks", required_argument, NULL, 'n' },
		{ "id-file", required_argument, NULL, 'f' },
		{ "rounds", required_argument, NULL, 'R' },
		{ "bytes", required_argument, NULL, 'b' },
		{ "inflight", required_argument, NULL, 'k' },
		{ "spread-us", required_argument, NULL, 's' },
		{ 0 },
	};
	size_t bytes = 8 << 20;
	int nranks = 2, rounds = 10, inflight = 8, spread_us = 20000, ndev = 0, c;
	const char *prefix = NULL;
	float *sbuf, *rbuf;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'r': rank_id = atoi(optarg); break;
		case 'n': nranks = atoi(optarg); break;
		case 'f': prefix = optarg; break;
		case 'R': rounds = atoi(optarg); break;
		case 'b': bytes = strtoull(optarg, NULL, 0); break;
		case 'k': inflight = atoi(optarg); break;
		case 's': spread_us = atoi(optarg); break;
		default:
			fprintf(stderr,
				"usage: nccl_abort --rank R --nranks N --id-file PREFIX "
				"[--rounds N] [--bytes B] [--inflight K] [--spread-us U]\n");
			return 2;
		}
	}
	if (rank_id < 0 || rank_id >= nranks || !prefix || rounds < 1 || bytes < 4 ||
	    inflight < 1 || spread_us < 0) {
		fprintf(stderr, "nccl_abort: need --rank in 0..nranks-1, --id-file, rounds >= 1, "
				"bytes >= 4, inflight >= 1\n");
		return 2;
	}
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
		printf("SKIP: no CUDA device visible to rank %d\n", rank_id);
		return SKIP;
	}
	CUDA_CHECK(cudaSetDevice(0));
	CUDA_CHECK(cudaMalloc((void **)&sbuf, bytes));
	CUDA_CHECK(cudaMalloc((void **)&rbuf, bytes));
	CUDA_CHECK(cudaMemset(sbuf, 0, bytes));
	if (rank_id == 0)
		printf("# round  abort_after_us  abort_ms  abort_result\n");
	for (int round = 0; round < rounds; round++) {
		unsigned seed = (unsigned)(round * 7919 + rank_id * 104729 + 1);
		int delay_us = spread_us ? (int)(rand_r(&seed) % (unsigned)(spread_us + 1)) : 0;
		ncclUniqueId id;
		ncclComm_t comm;
		cudaStream_t stream;
		ncclResult_t res;
		double t0;

		if (exchange_id(prefix, round, &id))
			return 1;
		NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank_id));
		CUDA_CHECK(cudaStreamCreate(&stream));
		for (int i = 0; i < inflight; i++)
			NCCL_CHECK(ncclAllReduce(sbuf, rbuf, bytes / sizeof(float), ncclFloat,
						 ncclSum, comm, stream));
		usleep((useconds_t)delay_us);
		t0 = now_s();
		res = ncclCommAbort(comm);
		if (rank_id == 0)
			printf("%7d %15d %9.1f  %s\n", round, delay_us, (now_s() - t0) * 1e3,
			       ncclGetErrorString(res));
		fflush(stdout);
		/* the aborted kernels have returned; what is left on the stream is ours */
		CUDA_CHECK(cudaStreamSynchronize(stream));
		CUDA_CHECK(cudaStreamDestroy(stream));
	}
	cudaFree(sbuf);
	cudaFree(rbuf);
	if (verified_allreduce(prefix, rounds, nranks, 1 << 18))
		return 1;
	if (rank_id == 0)
		printf("after %d aborted rounds: a new communicator's all-reduce verified\n",
		       rounds);
	return 0;
}

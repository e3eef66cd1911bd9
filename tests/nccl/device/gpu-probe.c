/* gpu-probe: tiny checks for .dev/gpu-run.sh, no link-time deps beyond libc/libdl.
 *   gpu-probe nccl PATH     dlopen PATH (a libnccl.so.2), print ncclGetVersion
 *   gpu-probe cuda PATH     dlopen PATH (a libcudart.so.13): runtime/driver versions,
 *                           device count, cudaMalloc+cudaFree of 1 MiB on device 0
 * exit 0 ok, 1 failure (reason printed). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int (*fn_int_p)(int *);
int main(int argc, char **argv)
{
	void *h;
	if (argc != 3) {
		fprintf(stderr, "usage: gpu-probe nccl|cuda PATH\n");
		return 2;
	}
	h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		printf("dlopen %s: %s\n", argv[2], dlerror());
		return 1;
	}
	if (!strcmp(argv[1], "nccl")) {
		fn_int_p getv = (fn_int_p)dlsym(h, "ncclGetVersion");
		int v = 0, r;
		if (!getv) {
			printf("%s: no ncclGetVersion\n", argv[2]);
			return 1;
		}
		r = getv(&v);
		printf("ncclGetVersion rc=%d version=%d (%d.%d.%d)\n", r, v, v / 10000,
		       (v / 100) % 100, v % 100);
		return r != 0;
	}
	if (!strcmp(argv[1], "cuda")) {
		fn_int_p rtv = (fn_int_p)dlsym(h, "cudaRuntimeGetVersion");
		fn_int_p drv = (fn_int_p)dlsym(h, "cudaDriverGetVersion");
		fn_int_p cnt = (fn_int_p)dlsym(h, "cudaGetDeviceCount");
		int (*mal)(void **, size_t) = (int (*)(void **, size_t))dlsym(h, "cudaMalloc");
		int (*fre)(void *) = (int (*)(void *))dlsym(h, "cudaFree");
		const char *(*es)(int) = (const char *(*)(int))dlsym(h, "cudaGetErrorString");
		int a = 0, b = 0, n = 0, r;
		void *p = NULL;
		if (!rtv || !drv || !cnt || !mal || !fre || !es) {
			printf("%s: missing cudart symbols\n", argv[2]);
			return 1;
		}
		rtv(&a);
		drv(&b);
		r = cnt(&n);
		printf("cudart runtime=%d driver=%d devices=%d (rc=%d %s)\n", a, b, n, r, es(r));
		if (r || n < 1)
			return 1;
		r = mal(&p, 1 << 20);
		printf("cudaMalloc(1 MiB): rc=%d %s\n", r, es(r));
		if (r)
			return 1;
		r = fre(p);
		printf("cudaFree: rc=%d %s\n", r, es(r));
		return r != 0;
	}
	fprintf(stderr, "gpu-probe: unknown mode %s\n", argv[1]);
	return 2;
}

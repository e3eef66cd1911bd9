// SPDX-License-Identifier: Apache-2.0
/* Built only where the CUDA toolkit's cuda.h is installed: the stand-in's values are CUDA's. */
#include <cuda.h>

#define CUDA_STANDIN_VALUES_ONLY
#include "tests/cuda/cuda_standin.h"

#define SAME(name, value) _Static_assert((name) == (value), #name " differs from cuda.h");
CUDA_STANDIN_VALUES(SAME)

int main(void)
{
	return 0;
}

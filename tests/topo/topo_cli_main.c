// SPDX-License-Identifier: Apache-2.0
/* A stand-alone `braid topo` for tests/topo: tools/topo*.c without the dispatcher. */
int braid_cmd_topo(int argc, char **argv);

int main(int argc, char **argv)
{
	argv[0] = "topo";
	return braid_cmd_topo(argc, argv);
}

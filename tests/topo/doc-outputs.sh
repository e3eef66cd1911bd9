#!/usr/bin/env bash
# Print the "braid topo" outputs of docs/topology.md (the part after "Test topologies"):
#   tests/topo/doc-outputs.sh [BRAID_TOPO_COMMAND...]   (default: build/braid topo --no-plugin)
set -eu
if [ $# -eq 0 ]; then
	set -- build/braid topo --no-plugin
fi
show() { # file, title, description
	printf '### %s\n\n%s\n\n```\n$ braid topo --xml tests/topo/%s\n' "$2" "$3" "$1"
	"${cmd[@]}" --xml "tests/topo/$1"
	printf '```\n\n'
}
cmd=("$@")
show 8gpu-nic-per-pair.xml "8 GPUs, one NIC per GPU pair (8gpu-nic-per-pair.xml)" \
"Two sockets, four PCIe switches, each with two A100s and one ConnectX-6 (mlx5_N, ibN).
Socket 1's second switch sits below another switch that also holds a storage ConnectX-6 Dx
(mlx5_4, PXB to GPUs 6 and 7). eno1 is an onboard gigabit port. Rails: one per switch, two
GPUs each; mlx5_4 is in no rail (GPUs 6 and 7 have mlx5_3 closer), nor is eno1 (not RDMA)."
show 8gpu-4efa-per-gpu.xml "8 GPUs, four EFA devices per GPU (8gpu-4efa-per-gpu.xml)" \
"A p5-like host: eight H100s, each in a PCIe switch with four EFA devices. Eight rails of
four EFA devices each, all PIX."
show 2socket-remote-nics.xml "NICs on the other socket (2socket-remote-nics.xml)" \
"Four GPUs on socket 0, both NICs on socket 1, a ConnectX-6 at PCIe 4.0 x16 and a
ConnectX-5 at PCIe 3.0 x16. Every GPU is SYS from both NICs at the same distance, so one
rail holds both NICs for all GPUs; warnings for each GPU, each NIC and the mixed speeds."
show no-nic.xml "No NIC (no-nic.xml)" "A workstation with two GPUs and no network device."
show no-gpu.xml "No GPU (no-gpu.xml)" "Two sockets, one ConnectX-6 each, no GPU: no rails,
nothing to warn about."
show hwloc-2socket-3gpu-mlx5.xml "A real machine (hwloc-2socket-3gpu-mlx5.xml)" \
"From hwloc's test suite: GPU 03:00.0 on socket 0, 83:00.0 and 84:00.0 on socket 1 (only
84:00.0 has a CUDA device), mlx5_0 behind 84:00.0's root port, two gigabit ports. mlx5_0 is
PIX to 84:00.0, which forms the rail; 83:00.0 (PHB) and 03:00.0 (SYS) join it."
show no-pci.xml "Nothing on PCI (no-pci.xml)" "A VM or container where hwloc sees no PCI at all."

#!/usr/bin/env python3
# Write the hwloc 2.x XML topologies used by tests/topo/test_topo.c.
#
#   python3 tests/topo/gen-fixtures.py [OUTDIR]     (default: the folder of this script)
#
# The output is committed; rerun after changing a machine below. Each file loads with
# `lstopo -i FILE`. The machines are small on the CPU side (two cores per socket) and
# detailed on PCIe, which is what braid looks at. A PCIe switch is modelled the way
# hwloc shows one: an upstream-port bridge with one downstream-port bridge per slot.
import os
import sys
from xml.sax.saxutils import quoteattr

# PCIe link speeds as hwloc computes them (GB/s): GT/s * lanes * encoding / 8.
GEN3_X16 = 15.753846
GEN4_X8 = 15.753846
GEN4_X16 = 31.507692
GEN5_X16 = 63.015385
GIGABIT_X1 = 0.615385  # gen2 x1 (an onboard gigabit port)

OSDEV_GPU, OSDEV_NET, OSDEV_OFA, OSDEV_COPROC = 1, 2, 3, 5


class Node:
    def __init__(self, otype, attrs, infos=(), children=None):
        self.otype, self.attrs, self.infos = otype, attrs, list(infos)
        self.children = children if children is not None else []

    def add(self, *kids):
        self.children.extend(kids)
        return self


class Machine:
    """Builds one topology: sockets with NUMA nodes and cores, then PCI trees."""

    def __init__(self, sockets, cores_per_socket=2):
        self.gp = 1
        self.sockets = []
        self.cps = cores_per_socket
        total = sockets * cores_per_socket
        allmask = (1 << total) - 1
        nodes = (1 << sockets) - 1
        self.root = Node("Machine", self.cpu_attrs(0, allmask, nodes, allowed=True))
        for s in range(sockets):
            mask = ((1 << cores_per_socket) - 1) << (s * cores_per_socket)
            pkg = Node("Package", self.cpu_attrs(s, mask, 1 << s))
            numa = Node("NUMANode", dict(self.cpu_attrs(s, mask, 1 << s),
                                         local_memory=str(64 << 30)))
            pkg.add(numa)
            for c in range(cores_per_socket):
                cpu = s * cores_per_socket + c
                core = Node("Core", self.cpu_attrs(cpu, 1 << cpu, 1 << s))
                core.add(Node("PU", self.cpu_attrs(cpu, 1 << cpu, 1 << s)))
                pkg.add(core)
            self.root.add(pkg)
            self.sockets.append(pkg)

    def gpi(self):
        self.gp += 1
        return str(self.gp)

    def cpu_attrs(self, os_index, cpus, nodes, allowed=False):
        a = {"os_index": str(os_index), "cpuset": "0x%08x" % cpus,
             "complete_cpuset": "0x%08x" % cpus}
        if allowed:
            a["allowed_cpuset"] = "0x%08x" % cpus
        a["nodeset"] = "0x%08x" % nodes
        a["complete_nodeset"] = "0x%08x" % nodes
        if allowed:
            a["allowed_nodeset"] = "0x%08x" % nodes
        a["gp_index"] = self.gpi()
        return a

    def host_bridge(self, socket, bus_lo, bus_hi):
        hb = Node("Bridge", {"gp_index": self.gpi(), "bridge_type": "0-1", "depth": "0",
                             "bridge_pci": "0000:[%02x-%02x]" % (bus_lo, bus_hi)})
        self.sockets[socket].add(hb)
        return hb

    def bridge(self, busid, bus_lo, bus_hi, depth, vendor="1000", device="c010",
               speed=GEN4_X16, name="PEX88096 PCIe Switch"):
        return Node("Bridge", {
            "gp_index": self.gpi(), "bridge_type": "1-1", "depth": str(depth),
            "bridge_pci": "0000:[%02x-%02x]" % (bus_lo, bus_hi),
            "pci_busid": busid,
            "pci_type": "0604 [%s:%s] [0000:0000] 00 00" % (vendor, device),
            "pci_link_speed": "%f" % speed},
            infos=[("PCIVendor", "Broadcom / LSI" if vendor == "1000" else "Intel"),
                   ("PCIDevice", name)])

    def pcidev(self, busid, cls, vendor, device, speed, vname, dname, osdevs=()):
        n = Node("PCIDev", {"gp_index": self.gpi(), "pci_busid": busid,
                            "pci_type": "%s [%s:%s] [%s:0000] 00 00" % (cls, vendor, device,
                                                                        vendor),
                            "pci_link_speed": "%f" % speed},
                 infos=[("PCIVendor", vname), ("PCIDevice", dname)])
        for name, otype, subtype, infos in osdevs:
            a = {"gp_index": self.gpi(), "name": name}
            if subtype:
                a["subtype"] = subtype
            a["osdev_type"] = str(otype)
            n.add(Node("OSDev", a, infos=infos))
        return n

    def gpu(self, busid, cuda=None, speed=GEN4_X16, model="GA100 [A100 SXM4 80GB]",
            device="20b2"):
        osdevs = []
        if cuda is not None:
            osdevs.append(("cuda%d" % cuda, OSDEV_COPROC, "CUDA",
                           [("Backend", "CUDA"), ("GPUVendor", "NVIDIA Corporation"),
                            ("GPUModel", model)]))
            osdevs.append(("nvml%d" % cuda, OSDEV_GPU, None,
                           [("Backend", "NVML"), ("GPUVendor", "NVIDIA Corporation"),
                            ("GPUModel", model)]))
        return self.pcidev(busid, "0302", "10de", device, speed, "NVIDIA Corporation", model,
                           osdevs)

    def mlx5(self, busid, ibdev, netdev, speed=GEN4_X16, model="MT28908 Family [ConnectX-6]",
             device="101b", cls="0207"):
        osdevs = [(ibdev, OSDEV_OFA, None, [("NodeGUID", "0c42:a103:0000:%04x" %
                                             int(busid[5:7], 16))])]
        if netdev:
            osdevs.insert(0, (netdev, OSDEV_NET, None, [("Port", "1")]))
        return self.pcidev(busid, cls, "15b3", device, speed, "Mellanox Technologies", model,
                           osdevs)

    def efa(self, busid, name, speed=GEN4_X16):
        return self.pcidev(busid, "0200", "1d0f", "efa1", speed, "Amazon.com, Inc.",
                           "Elastic Fabric Adapter (EFA)",
                           [(name, OSDEV_OFA, None, [])])

    def ethernet(self, busid, netdev, speed=GIGABIT_X1):
        return self.pcidev(busid, "0200", "8086", "1533", speed, "Intel Corporation",
                           "I210 Gigabit Network Connection",
                           [(netdev, OSDEV_NET, None, [("Address", "3c:ec:ef:00:00:01")])])

    def nvme(self, busid, name):
        return self.pcidev(busid, "0108", "144d", "a824", GEN4_X16 / 4, "Samsung",
                           "NVMe SSD Controller PM173X",
                           [(name, 0, "Disk", [])])

    def switch(self, bus, slots, root_busid, speed=GEN4_X16, hb=None):
        """Root port at root_busid, a switch below it, one downstream port per slot.

        bus: the host bridge's bus (where the root port is); the switch's buses follow. slots: a list
        of callables taking the bus id of the slot's device and returning the device."""
        n = len(slots)
        top = bus + 2 + n  # subordinate bus of the whole switch
        rp = self.bridge(root_busid, bus + 1, top, 1, vendor="8086", device="347a",
                         name="Root Port", speed=speed)
        up = self.bridge("0000:%02x:00.0" % (bus + 1), bus + 2, top, 2, speed=speed)
        rp.add(up)
        for i, make in enumerate(slots):
            sub = bus + 3 + i
            dp = self.bridge("0000:%02x:%02x.0" % (bus + 2, i), sub, sub, 3, speed=speed)
            dp.add(make("0000:%02x:00.0" % sub))
            up.add(dp)
        if hb is not None:
            hb.add(rp)
        return rp

    def xml(self):
        out = ['<?xml version="1.0" encoding="UTF-8"?>',
               '<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
               '<topology version="2.0">']
        self._emit(self.root, 1, out)
        n = len(self.sockets)
        if n > 1:
            out.append('  <distances2 type="NUMANode" nbobjs="%d" kind="5" '
                       'name="NUMALatency" indexing="os">' % n)
            out.append('    <indexes length="%d">%s </indexes>' %
                       (2 * n, " ".join(str(i) for i in range(n))))
            vals = " ".join("10" if i == j else "21" for i in range(n) for j in range(n))
            out.append('    <u64values length="%d">%s </u64values>' % (len(vals) + 1, vals))
            out.append('  </distances2>')
        out.append('</topology>')
        return "\n".join(out) + "\n"

    def _emit(self, node, level, out):
        pad = "  " * level
        attrs = " ".join("%s=%s" % (k, quoteattr(v)) for k, v in node.attrs.items())
        head = '%s<object type="%s" %s' % (pad, node.otype, attrs)
        if not node.children and not node.infos:
            out.append(head + "/>")
            return
        out.append(head + ">")
        for k, v in node.infos:
            out.append('%s  <info name=%s value=%s/>' % (pad, quoteattr(k), quoteattr(v)))
        for c in node.children:
            self._emit(c, level + 1, out)
        out.append("%s</object>" % pad)


def eight_gpu_nic_per_pair(names=(0, 1, 2, 3, 4), reverse=False):
    """HGX-like 8-GPU server: 2 sockets, one root complex (host bridge) per PCIe switch,
    each switch holds two GPUs and one ConnectX-6 (mlx5_N / ibN). Socket 1's second
    complex is two-level: a leaf switch with GPUs 6, 7 and mlx5_3, and beside it a storage
    ConnectX-6 Dx (mlx5_4) one switch up, PXB to GPUs 6 and 7. An onboard gigabit port
    (eno1) hangs off socket 0's chipset.

    names: the N of mlx5_N / ibN of the four GPU NICs and the storage NIC, in bus order
    (the kernel numbers them in the order it found them, which differs between hosts);
    reverse: write each socket's PCI trees in reverse order."""
    m = Machine(sockets=2)
    cuda = iter(range(8))
    nic = iter(names[:4])

    def g(bus):
        return m.gpu(bus, cuda=next(cuda))

    def n(bus):
        i = next(nic)
        return m.mlx5(bus, "mlx5_%d" % i, "ib%d" % i)

    hb = m.host_bridge(0, 0x00, 0x0f)
    hb.add(m.bridge("0000:00:1c.0", 0x01, 0x01, 1, vendor="8086", device="a190",
                    name="Chipset Root Port", speed=GIGABIT_X1)
           .add(m.ethernet("0000:01:00.0", "eno1")))
    m.switch(0x10, [g, g, n], "0000:10:01.0", hb=m.host_bridge(0, 0x10, 0x1f))
    m.switch(0x30, [g, g, n], "0000:30:01.0", hb=m.host_bridge(0, 0x30, 0x3f))
    m.switch(0x90, [g, g, n], "0000:90:01.0", hb=m.host_bridge(1, 0x90, 0x9f))
    # Two levels: root port b0:01.0 -> switch b1 -> [leaf switch b3.. with g, g, n ; mlx5_4]
    hb = m.host_bridge(1, 0xb0, 0xbf)
    rp = m.bridge("0000:b0:01.0", 0xb1, 0xb9, 1, vendor="8086", device="347a",
                  name="Root Port")
    up = m.bridge("0000:b1:00.0", 0xb2, 0xb9, 2)
    d0 = m.bridge("0000:b2:00.0", 0xb3, 0xb7, 3)
    d0.add(*m.switch(0xb2, [g, g, n], "0000:b2:00.0").children)  # leaf switch under d0
    d1 = m.bridge("0000:b2:01.0", 0xb8, 0xb8, 3)
    d1.add(m.mlx5("0000:b8:00.0", "mlx5_%d" % names[4], "ens8f0",
                  model="MT2892 Family [ConnectX-6 Dx]", device="101d", cls="0200"))
    up.add(d0, d1)
    rp.add(up)
    hb.add(rp)
    if reverse:
        for pkg in m.sockets:
            pkg.children = [c for c in pkg.children if c.otype != "Bridge"] + \
                [c for c in reversed(pkg.children) if c.otype == "Bridge"]
    return m


def eight_gpu_nic_per_pair_renamed():
    """The same machine as another host of the cluster sees it: its kernel found the NICs
    in another order (mlx5_3 at 13:00.0 ... mlx5_0 at b5:00.0, the storage NIC mlx5_4),
    and hwloc lists its PCI trees in reverse order. The rails must come out the same."""
    return eight_gpu_nic_per_pair(names=(3, 2, 1, 0, 4), reverse=True)


def eight_gpu_four_efa():
    """p5-like 8-GPU server: 2 sockets, four root complexes each, one PCIe switch per
    complex with one H100 and four EFA devices (rdmap<bus>s0, rdma-core's names)."""
    m = Machine(sockets=2)
    cuda = iter(range(8))

    def g(bus):
        return m.gpu(bus, cuda=next(cuda), speed=GEN5_X16, model="GH100 [H100 SXM5 80GB]",
                     device="2330")

    def e(bus):
        return m.efa(bus, "rdmap%ds0" % int(bus[5:7], 16))

    for i, base in enumerate([0x10, 0x20, 0x30, 0x40, 0x90, 0xa0, 0xb0, 0xc0]):
        m.switch(base, [g, e, e, e, e], "0000:%02x:01.0" % base,
                 hb=m.host_bridge(0 if i < 4 else 1, base, base + 0x0f))
    return m


def two_socket_remote_nics():
    """Two sockets: four GPUs on socket 0 (two switches), both NICs on socket 1, of two
    speeds (ConnectX-6 at gen4 x16, ConnectX-5 at gen3 x16)."""
    m = Machine(sockets=2)
    cuda = iter(range(4))

    def g(bus):
        return m.gpu(bus, cuda=next(cuda))

    def nv(bus):
        return m.nvme(bus, "nvme0n1")

    m.switch(0x10, [g, g, nv], "0000:10:01.0", hb=m.host_bridge(0, 0x10, 0x1f))
    m.switch(0x30, [g, g], "0000:30:01.0", hb=m.host_bridge(0, 0x30, 0x3f))
    hb = m.host_bridge(1, 0x80, 0x8f)
    hb.add(m.bridge("0000:80:01.0", 0x81, 0x81, 1, vendor="8086", device="347a",
                    name="Root Port").add(m.mlx5("0000:81:00.0", "mlx5_0", "ib0")))
    hb.add(m.bridge("0000:80:03.0", 0x82, 0x82, 1, vendor="8086", device="347a",
                    name="Root Port", speed=GEN3_X16)
           .add(m.mlx5("0000:82:00.0", "mlx5_1", "ib1", speed=GEN3_X16,
                       model="MT27800 Family [ConnectX-5]", device="1017")))
    return m


def no_nic():
    """A workstation: one socket, two GPUs on root ports, NVMe, no network at all."""
    m = Machine(sockets=1, cores_per_socket=4)
    hb = m.host_bridge(0, 0x00, 0xff)
    for i, (rp, bus) in enumerate([("0000:00:01.0", 0x01), ("0000:00:03.0", 0x02)]):
        hb.add(m.bridge(rp, bus, bus, 1, vendor="8086", device="a70d", name="Root Port")
               .add(m.gpu("0000:%02x:00.0" % bus, cuda=i, model="AD102 [RTX 6000 Ada]",
                          device="26b1")))
    hb.add(m.bridge("0000:00:06.0", 0x03, 0x03, 1, vendor="8086", device="a74d",
                    name="Root Port").add(m.nvme("0000:03:00.0", "nvme0n1")))
    return m


def no_gpu():
    """A two-socket storage/CPU host: one ConnectX-6 per socket and an onboard port; no
    GPU."""
    m = Machine(sockets=2)
    hb = m.host_bridge(0, 0x00, 0x7f)
    hb.add(m.bridge("0000:00:1c.0", 0x01, 0x01, 1, vendor="8086", device="a190",
                    name="Chipset Root Port", speed=GIGABIT_X1)
           .add(m.ethernet("0000:01:00.0", "eno1")))
    hb.add(m.bridge("0000:00:02.0", 0x17, 0x17, 1, vendor="8086", device="347a",
                    name="Root Port").add(m.mlx5("0000:17:00.0", "mlx5_0", "ib0")))
    hb = m.host_bridge(1, 0x80, 0xff)
    hb.add(m.bridge("0000:80:02.0", 0x98, 0x98, 1, vendor="8086", device="347a",
                    name="Root Port").add(m.mlx5("0000:98:00.0", "mlx5_1", "ib1")))
    return m


def no_pci():
    """A VM or container that shows no PCI at all (and so no GPU, no NIC to hwloc)."""
    return Machine(sockets=1)


FIXTURES = {
    "8gpu-nic-per-pair.xml": eight_gpu_nic_per_pair,
    "8gpu-nic-per-pair-renamed.xml": eight_gpu_nic_per_pair_renamed,
    "8gpu-4efa-per-gpu.xml": eight_gpu_four_efa,
    "2socket-remote-nics.xml": two_socket_remote_nics,
    "no-nic.xml": no_nic,
    "no-gpu.xml": no_gpu,
    "no-pci.xml": no_pci,
}


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for name, build in FIXTURES.items():
        with open(os.path.join(outdir, name), "w") as f:
            f.write(build().xml())
    # Broken inputs: the error paths must report, not crash.
    good = eight_gpu_nic_per_pair().xml()
    with open(os.path.join(outdir, "malformed.xml"), "w") as f:
        f.write(good[: len(good) // 2])
    with open(os.path.join(outdir, "not-a-topology.xml"), "w") as f:
        f.write('<?xml version="1.0"?>\n<html><body>not hwloc</body></html>\n')


if __name__ == "__main__":
    main()

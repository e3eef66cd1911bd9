#!/usr/bin/env python3
# Files in a circle of calls (issue 17): an edge f -> g when f calls a non-static function
# defined in g, over plugin/, net_ib/, net_ofi/, topo/ and tools/ (calls through ops tables
# and function pointers are not seen). Prints the circles, or "no circles"; exit 1 on any.
# Usage: tests/lint/call-circles.py   (from the repository root; in make lint and make test)
import re,glob,sys,itertools
files=[f for d in ['plugin','net_ib','net_ofi','topo','tools'] for f in glob.glob(d+'/*.c')]
defs={}
src={}
for f in files:
    s=open(f).read()
    s=re.sub(r'/\*.*?\*/','',s,flags=re.S)
    s=re.sub(r'"(\\.|[^"\\])*"','""',s)
    src[f]=s
    for m in re.finditer(r'^(?!static)[A-Za-z_][\w \*]*?\b([a-z_][a-z0-9_]*)\s*\([^;{]*\)\s*\{',s,flags=re.M):
        defs.setdefault(m.group(1),set()).add(f)
edges={f:set() for f in files}
for f,s in src.items():
    for name in set(re.findall(r'\b([a-z_][a-z0-9_]*)\s*\(',s)):
        for g in defs.get(name,()):
            if g!=f: edges[f].add(g)
# tarjan
idx={};low={};st=[];on=set();res=[];c=[0]
sys.setrecursionlimit(10000)
def sc(v):
    idx[v]=low[v]=c[0];c[0]+=1;st.append(v);on.add(v)
    for w in edges[v]:
        if w not in idx: sc(w);low[v]=min(low[v],low[w])
        elif w in on: low[v]=min(low[v],idx[w])
    if low[v]==idx[v]:
        comp=[]
        while True:
            w=st.pop();on.discard(w);comp.append(w)
            if w==v:break
        if len(comp)>1: res.append(comp)
for v in files:
    if v not in idx: sc(v)
print(res if res else "no circles")
sys.exit(1 if res else 0)

"""Per-opcode instruction counts and the most-stalled SASS instructions of one kernel, from Nsight Compute's
source page exported as CSV (`ncu -i REPORT --page source --print-source sass --csv | gzip > F.csv.gz`,
as profile_h200.sh does).  Usage: python3 ncu_sass_summary.py F.csv.gz[:K] [top N]
(K: the K-th kernel of a file holding several, as in ncu_sass_compare.py; default 0)"""
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ncu_sass_compare import load_page, opcode  # noqa: E402

_, hdr, data = load_page(sys.argv[1])
ix={h:i for i,h in enumerate(hdr)}
tot_exec=0; by_op=collections.Counter(); stall_op=collections.Counter(); samples=0
lines=[]
for r in data:
    if len(r)<len(hdr): continue
    src=r[ix['Source']].strip()
    base=opcode(src) if src else ''
    ex=int(r[ix['Instructions Executed']] or 0)
    s=int(r[ix['Warp Stall Sampling (All Samples)']] or 0)
    tot_exec+=ex; by_op[base]+=ex; stall_op[base]+=s; samples+=s
    lines.append((s,ex,r[ix['Address']][-5:],src, {k:r[ix[k]] for k in ['stall_long_sb','stall_wait','stall_barrier','stall_short_sb','stall_mio','stall_math','stall_dispatch','stall_gmma'] if k in ix}))
print("total warp insts", tot_exec, "samples", samples, "n sass", len(data))
print("by opcode (exec):")
for k,v in by_op.most_common(25): print(f"  {k:12s} {v/1e6:9.1f}M  {100*v/tot_exec:5.1f}%  stall samples {100*stall_op[k]/samples:5.1f}%")
print("top stalled instructions:")
for s,ex,a,src,st in sorted(lines,reverse=True)[:int(sys.argv[2]) if len(sys.argv)>2 else 30]:
    print(f"  {100*s/samples:5.2f}% ex {ex/1e6:7.2f}M {a} {src[:60]:60s} {' '.join(k.replace('stall_','')+'='+v for k,v in st.items() if v not in ('0',''))}")

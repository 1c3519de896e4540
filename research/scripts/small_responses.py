#!/usr/bin/env python3
"""Small responses (<= 16 KiB) with fusion off: each sweep env's fusion-off job against its fusion-off replays.

    python research/scripts/small_responses.py

Per env: the sweep's fusion-off job (``runs/<env>/timelines/*fusion-off*``) per size, mean / median
collective span (ms, each tensor name's first use left out) / the fitted tier's ``allreduce_s``; then
the fusion-off replays' (``validation/timelines/fresh-*/proposal-K-r*``) mean and median span of the
responses <= 16 KiB. Reads committed records only (docs/fresh-environments.md section 10).
"""
import sys,numpy as np,glob,json,os
from pathlib import Path
os.chdir(Path(__file__).resolve().parents[2])
sys.path.insert(0,'.')
from autotuner.readers.timeline import read_timeline
from autotuner.model.costmodel import CostModel
def spans(tl, maxn=1<<30, skip_first=True):
    seen=set(); out={}
    for x in sorted(tl.responses,key=lambda r:r.start_us):
        if x.op!='allreduce' or len(x.tensors)!=1: continue
        nm=x.tensors[0]
        if skip_first and nm not in seen:
            seen.add(nm); continue
        out.setdefault(x.nbytes,[]).append(x.duration_us/1e3)
    return out
for env in ['fresh-poll-0.75gbit','fresh-poll-2gbit','fresh-poll-2x1-2gbit','fresh-0.5gbit','fresh-3gbit','fresh-2x1-5gbit','local-gloo-1gbit-sweep']:
    m=CostModel.from_dict(json.load(open(f'autotuner/models/{env}.json'))['cost_model'])
    t=m.inter
    fo=glob.glob(f'runs/{env}/timelines/*fusion-off*')
    if not fo: print(env,'no fo'); continue
    sp=spans(read_timeline(fo[0]))
    line=[]
    for n in sorted(sp):
        if n>1<<20: continue
        v=np.array(sp[n]); line.append(f"{n//1024}K {v.mean():.2f}/{np.median(v):.2f}/{t.allreduce_s(n,2)*1e3:.2f}")
    print(env, ' | '.join(line))
    # training fusion-off
    val=glob.glob(f'runs/{env}/validation/fresh-*-proposals.json')
    if val:
        props=json.load(open(val[0])); idx=[i for i,p in enumerate(props) if p.get('fusion_threshold_mb',-1)==0]
        if idx:
            name=os.path.basename(val[0]).replace('-proposals.json','')
            tls=glob.glob(f'runs/{env}/validation/timelines/{name}/proposal-{idx[0]+1}-r*.json.gz')
            allsp={}
            for f in tls:
                for n,v in spans(read_timeline(f)).items(): allsp.setdefault(n,[]).extend(v)
            if not allsp: continue
            small=[x for n,v in allsp.items() if n<=16384 for x in v]
            mid=[x for n,v in allsp.items() if 16384<n<=65536 for x in v]
            print('   training fusion-off: <=16K mean %.2f median %.2f (n=%d)'%(np.mean(small),np.median(small),len(small)))

#!/usr/bin/env python3
"""Accuracy on seeds the suite never uses: simulate, analyze, compare with the truth.

Usage: scripts/held-out.py SCENARIOS FIRST_SEED END_SEED  (after `cargo build --release`;
NCCLPM_BIN=path analyses with another build (SIM_BIN=path simulates with another); HELD_OUT_PROFILE=full and HELD_OUT_SIZES=64,128
change the simulator's profile and the world sizes drawn; HELD_OUT_DIR=folder for the jobs)
e.g. scripts/held-out.py congestion,firewall,healthy 8000 8006
Prints each miss, then per scenario [jobs, status, kind, stuck ranks, place]."""
import json, subprocess, sys, os, shutil, random
B=os.environ.get('NCCLPM_BIN') or os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'target', 'release', 'ncclpm')
S=os.environ.get('SIM_BIN') or B
scen=sys.argv[1].split(',')
seeds=range(int(sys.argv[2]), int(sys.argv[3]))
layouts=['torchrun','slurm','nccl-files']
torch=['1.13.1','2.1.2','2.2.2','2.3.1','2.4.1','2.5.1','2.6.0','2.7.1','2.8.0']
sizes=[int(n) for n in os.environ.get('HELD_OUT_SIZES','8,16,16,64').split(',')]
profile=os.environ.get('HELD_OUT_PROFILE','small')
tot={}
root=os.environ.get('HELD_OUT_DIR','/tmp/ncclpm-held-out')
for s in scen:
  for seed in seeds:
    rnd=random.Random(seed*31+sum(map(ord,s)))
    d=f'{root}/{s}-{seed}'
    shutil.rmtree(d,ignore_errors=True); os.makedirs(root,exist_ok=True)
    if os.path.exists(d+'.truth.json'): os.remove(d+'.truth.json')
    lay=rnd.choice(layouts); tv=rnd.choice(torch); n=rnd.choice(sizes)
    subprocess.run([S,'simulate','--cause',s,'--ranks',str(n),'--seed',str(seed),'--layout',lay,'--torch-version',tv,'--profile',profile,'-q',d],check=True)
    subprocess.run([B,'analyze',d,'-o',d+'.out'],capture_output=True)
    t=json.load(open(d+'.truth.json')); r=json.load(open(d+'.out/report.json'))['verdict']
    want=t['cause'] or {}; got=r.get('cause') or {}
    kind = (r['status']=='healthy') if not t['cause'] else want.get('kind')==got.get('kind')
    place = all(want.get(f) is None or want.get(f)==got.get(f) for f in ['host','device','port','gpu_bus_id']) if t['cause'] else got=={} or r['status']=='healthy'
    stuck = t['stuck_ranks']==r['stuck_ranks']
    st = t['status']==r['status']
    k=tot.setdefault(s,[0,0,0,0,0]); k[0]+=1; k[1]+=st; k[2]+=kind; k[3]+=stuck; k[4]+=place
    if not (st and kind and stuck and place):
      print(s,seed,n,lay,tv,'want',t['status'],t['stuck_ranks'],want.get('kind'),want.get('host'),want.get('device'),'| got',r['status'],r['stuck_ranks'][:10],got.get('kind'),got.get('host'),got.get('device'))
for s,k in tot.items(): print(s,k)
print('all',[sum(k[i] for k in tot.values()) for i in range(5)])

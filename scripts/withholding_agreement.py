#!/usr/bin/env python3
"""Tier agreement of the budgeted v2.1 withholding test with the exact one,
under the keyword oracle of `mf plan` (offline). Usage:
    python3 scripts/withholding_agreement.py $CARGO_TARGET_DIR/debug/mf
"""
import json, subprocess, glob, re, sys
MF = sys.argv[1]
rows = []
tot = {}
for f in sorted(glob.glob('scenarios/compaction/*.json')):
    def plan(b):
        out = subprocess.run([MF, 'plan', f, '--strategy', 'v2.1', '--ctx', '4608', '--reserve', '512', '--withholding-budget', str(b), '--json'], capture_output=True, text=True, check=True).stdout
        return json.loads(out)
    ex = plan(0)
    units = None
    tiers0 = [m['tier'] for m in ex['messages']]
    line = [f.split('/')[-1][:-5]]
    for b in (8, 12, 16):
        p = plan(b)
        notes = ' '.join(p['notes'])
        m = re.search(r'budgeted withholding test: (\d+) evaluations for (\d+) units', notes)
        evals, n = (int(m.group(1)), int(m.group(2))) if m else (None, None)
        comp = [i for i, mm in enumerate(ex['messages']) if mm['zone'] == 'compressible']
        agree = sum(1 for i in comp if p['messages'][i]['tier'] == tiers0[i])
        line.append(f"b{b}: {evals if evals else 'exact'} evals, {agree}/{len(comp)} tiers agree")
        tot.setdefault(b, [0, 0]); tot[b][0] += agree; tot[b][1] += len(comp)
    print(' | '.join(line))
for b, (a, n) in tot.items():
    print(f"budget {b}: {a}/{n} compressible-message tiers equal to the exact test ({100*a/n:.1f} %)")

#!/usr/bin/env python3
"""results_csv.py: the measured tables of bench/RESULTS.md as CSV files, one per chart.

The figures live in RESULTS.md, written by the people who measured them; this script
reads its Markdown tables back so that bench/plot.sh draws exactly what the text says
and nobody types a number twice.  Each CSV starts with comment lines ("# ...") naming
the RESULTS.md section, the device and the date the figures come from, then a header
line, then the rows.  Python 3 standard library only.

    bench/results_csv.py [--results bench/RESULTS.md] [--out bench/data]
    bench/results_csv.py --bench-gpu FILE.csv [--out DIR]

With --bench-gpu, the sgemm, reduce and spmv files come instead from the CSV
of a bench_gpu run (`bench_gpu --csv FILE.csv`), read directly: the same
columns, the device that run names and the file's date, so that a new
measurement can be drawn before anyone types it into RESULTS.md.

A table this script expects and cannot find is an error (exit 1, naming it): when
RESULTS.md is reorganised the charts must be looked at again, not silently dropped.
"""

import argparse
import csv
import datetime
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


class Table:
    """One Markdown table and the text that precedes it in its sections."""

    def __init__(self, h2, h3, context, header, rows, origin=None):
        self.h2, self.h3 = h2, h3
        self.context = context  # text of the ## section (and ### section) up to the table
        self.header, self.rows = header, rows
        # (source, device, date) of a table read from elsewhere than RESULTS.md
        self.origin = origin

    def col(self, name):
        try:
            return self.header.index(name)
        except ValueError:
            raise SystemExit(f"results_csv: table under '{self.h2}' has no column '{name}' "
                             f"(columns: {', '.join(self.header)})")


def cells(line):
    return [c.strip() for c in line.strip().strip('|').split('|')]


def parse_tables(text):
    tables, h2, h3 = [], '', ''
    h2_text, h3_text = [], []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith('## '):
            h2, h3, h2_text, h3_text = line[3:].strip(), '', [], []
        elif line.startswith('### '):
            h3, h3_text = line[4:].strip(), []
        elif line.startswith('|') and i + 1 < len(lines) and re.match(r'^\|[\s|:-]+\|\s*$', lines[i + 1]):
            header = cells(line)
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith('|'):
                rows.append(cells(lines[i]))
                i += 1
            tables.append(Table(h2, h3, '\n'.join(h2_text + h3_text), header, rows))
            continue
        # a table's context: its ## section's text before the first ###, and
        # its own ### section's (not the ### sections between: their dates
        # and devices are theirs)
        if h3:
            h3_text.append(line)
        else:
            h2_text.append(line)
        i += 1
    return tables


def find(tables, h2, h3=None, first_col=None):
    """The first table under the ## heading starting with h2 (and ### starting with h3)
    whose first column is called first_col."""
    for t in tables:
        if not t.h2.startswith(h2):
            continue
        if h3 is not None and not t.h3.startswith(h3):
            continue
        if first_col is not None and t.header[0] != first_col:
            continue
        return t
    raise SystemExit(f"results_csv: no table under '{h2}'"
                     + (f" / '{h3}'" if h3 else '') + (f" starting '{first_col}'" if first_col else '')
                     + " in RESULTS.md")


DATE = re.compile(r'\d{4}-\d{2}-\d{2}(?: \d{2}:\d{2}(?:-\d{2}:\d{2})? UTC)?')
DEVICE = re.compile(r'NVIDIA (H\d00[^,(;\n]*?)\s*[,(;\n]|\b(H\d00)\b')


def provenance(t):
    """Device and date: the last ones the text before the table names (the ### section's
    own re-run date wins over the ## section's)."""
    if t.origin:
        return t.origin[1], t.origin[2]
    dates = DATE.findall(t.context)
    devs = [m.group(1) or m.group(2) for m in DEVICE.finditer(t.context)]
    date = dates[-1] if dates else 'date not stated'
    dev = ('NVIDIA ' + devs[0].strip()) if devs else 'the CPU workstation'
    return dev, date


def num(s):
    """A figure from a cell: '21,207' -> 21207.0, '**0.311 ms**' -> 0.311."""
    m = re.search(r'-?[\d,]*\.?\d+', s.replace('*', ''))
    if not m:
        raise SystemExit(f"results_csv: no number in cell '{s}'")
    return float(m.group(0).replace(',', ''))


def write(out, name, sources, header, rows):
    path = os.path.join(out, name)
    with open(path, 'w', newline='') as f:
        for t, note in sources:
            dev, date = provenance(t)
            sec = t.h2 + (' / ' + t.h3 if t.h3 else '')
            src = t.origin[0] if t.origin else f'bench/RESULTS.md, section "{sec}"'
            f.write(f'# from {src}; {dev}; {date}' + (f'; {note}' if note else '') + '\n')
        w = csv.writer(f, lineterminator='\n')
        w.writerow(header)
        w.writerows(rows)
    return path


def wide(t, key_of, value_col, algos):
    """Pivot 'case | algo | ...' rows into one row per case with a column per algo."""
    ci, ai, vi = t.col('case'), t.col('algo'), t.col(value_col)
    order, vals = [], {}
    for r in t.rows:
        k = key_of(r[ci])
        if k not in vals:
            order.append(k)
            vals[k] = {}
        vals[k][r[ai]] = num(r[vi])
    return order, vals


def sgemm(tables, out):
    t = find(tables, 'GPU kernels', 'sgemm', 'case')
    algos = ['cublas', 'naive', 'smem', 'regblock', 'auto', 'cublas_tf32', 'tf32x3']
    order, vals = wide(t, lambda c: c, 'rate', algos)
    rows = []
    for c in order:
        m, n, k = (int(x) for x in c.split('x'))
        if m == n == k:  # the ladder by size; thin shapes stay in RESULTS.md's table
            rows.append([n] + [vals[c].get(a, '') for a in algos])
    return write(out, 'sgemm.csv', [(t, 'square sizes n^3; GFLOP/s, median of 20')],
                 ['n'] + algos, rows)


def reduce_(tables, out):
    t = find(tables, 'GPU kernels', 'reduce', 'case')
    algos = ['cub', 'smem', 'shfl', 'auto']
    order, vals = wide(t, lambda c: c, 'rate', algos)
    rows = []
    for c in order:
        op, size = c.split()[:2]
        b, e = size.split('^')
        rows.append([op, int(b) ** int(e)] + [vals[c].get(a, '') for a in algos])
    rows.sort(key=lambda r: (r[0], r[1]))  # one block per op, so gnuplot's lines do not break
    return write(out, 'reduce.csv', [(t, 'float32 in, double out; GB/s, median of 40')],
                 ['op', 'floats'] + algos, rows)


def spmv(tables, out):
    t = find(tables, 'GPU kernels', 'spmv', 'case')
    algos = ['cusparse', 'scalar', 'vector', 'balanced', 'auto', 'auto+maxrow']
    order, vals = wide(t, lambda c: c[:-4] if c.endswith('.mtx') else c, 'median ms', algos)
    rows = [[c] + [vals[c].get(a, '') for a in algos] for c in order]
    return write(out, 'spmv.csv', [(t, 'median ms per call')],
                 ['matrix'] + [a.replace('+', '_') + '_ms' for a in algos], rows)


def sgemm_bytes(n):
    return 4 * 3 * n * n  # A and B in, C out, float32


def laplace_bytes(g):
    """The 2-D 5-point Laplacian of a g x g grid: CSR (float values, int32 col_idx and
    row_ptr) plus x and y, float32."""
    n = g * g
    nnz = 5 * n - 4 * g
    return nnz * 8 + (n + 1) * 4 + 2 * 4 * n


def roundtrip(tables, out):
    d = find(tables, 'The daemon on the GPU', None, 'algo')
    s = find(tables, 'Big data without copies', None, 'path')
    v = find(tables, 'Big data without copies', None, 'mode')
    rows = []
    for r in d.rows:
        if r[0].startswith('auto'):
            rows.append(['socket', 'sgemm 4096^3', sgemm_bytes(4096), num(r[d.col('round trip')])])
    for r in s.rows:
        path = 'socket' if r[0].startswith('socket') else 'regions' if r[0].startswith('regions') else None
        if path:
            rows.append([path, 'sgemm 8192^3', sgemm_bytes(8192), num(r[s.col('round trip')])])
    lap = laplace_bytes(2048)
    for r in v.rows:
        m = r[0]
        if m.startswith('the matrix sent'):
            rows.append(['socket', 'spmv 2048^2 Laplacian', lap, num(r[1])])
        elif m.startswith('`csr_upload` once (') and 'y returned' in m:
            rows.append(['handle x; y returned', 'spmv 2048^2 Laplacian', lap, num(r[1])])
        elif 'x and y handles' in m:
            rows.append(['handles', 'spmv 2048^2 Laplacian', lap, num(r[1])])
    if len(rows) != 6:
        raise SystemExit(f"results_csv: expected 6 round trips, found {len(rows)}: RESULTS.md changed?")
    rows.sort(key=lambda r: (r[0], r[2]))
    return write(out, 'roundtrip.csv',
                 [(d, 'sgemm 4096^3, algo auto'), (s, 'sgemm 8192^3'), (v, 'spmv, median of 100; the x and y handles figure is the first run, 0.128-0.162 ms in the later runs there')],
                 ['path', 'case', 'operand_bytes', 'round_trip_ms'], rows)


def lanes(tables, out):
    t = find(tables, 'Sharing one GPU', None, 'gkcd')
    cols = ['tiny idle p50', 'idle p99', 'loaded p50', 'loaded p99']
    rows = []
    for r in t.rows:
        name = ('lanes' if r[0].startswith('lanes') else 'off' if 'latency-sms 0' in r[0]
                else 'fallback' if r[0].startswith('fallback') else None)
        if name:
            rows.append([name] + [num(r[t.col(c)]) for c in cols])
    if len(rows) != 3:
        raise SystemExit(f"results_csv: expected lanes/off/fallback rows, found {len(rows)}")
    return write(out, 'lanes.csv', [(t, 'tiny requests beside 2 clients of sgemm 8192^3; us')],
                 ['gkcd', 'idle_p50_us', 'idle_p99_us', 'loaded_p50_us', 'loaded_p99_us'], rows)


def bench_gpu_tables(path):
    """The rows of `bench_gpu --csv` as the three tables sgemm(), reduce_() and spmv() read
    from RESULTS.md (columns case, algo, rate, median ms), lab rungs left out."""
    try:
        with open(path, newline='', encoding='utf-8') as f:
            rows = list(csv.DictReader(f))
        mtime = os.path.getmtime(path)
    except OSError as e:
        sys.exit(f"results_csv: --bench-gpu {path}: {e.strerror}")
    need = ['op', 'case', 'algo', 'median_ms', 'rate', 'note', 'device']
    if not rows or any(c not in rows[0] for c in need):
        sys.exit(f"results_csv: --bench-gpu {path}: not the CSV of bench_gpu --csv "
                 f"(needs a header with {', '.join(need)} and rows)")
    # the run's time from the file's name (bench_gpu-2026-11-25T1031Z.csv) when it has one: a
    # checkout's files carry the time of the checkout, not of the run
    named = re.search(r'(\d{4}-\d{2}-\d{2})T(\d{2})(\d{2})Z', os.path.basename(path))
    if named:
        date = f'{named.group(1)} {named.group(2)}:{named.group(3)} UTC'
    else:
        date = datetime.datetime.fromtimestamp(mtime, datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')
    origin = (f'{os.path.basename(path)} (bench_gpu --csv)', rows[0]['device'] or 'device not stated', date)
    tables = []
    for op in ('sgemm', 'reduce', 'spmv'):
        sel = [[r['case'], r['algo'], r['rate'], r['median_ms']] for r in rows
               if r['op'] == op and r['note'] != 'lab']
        if not sel:
            sys.exit(f"results_csv: --bench-gpu {path}: no {op} rows (bench_gpu --ops left it out?)")
        tables.append(Table('GPU kernels', op, '', ['case', 'algo', 'rate', 'median ms'], sel, origin))
    return tables


def main():
    ap = argparse.ArgumentParser(description='Extract the measured tables of bench/RESULTS.md '
                                 'into CSV files for bench/plot.sh.')
    ap.add_argument('--results', default=os.path.join(HERE, 'RESULTS.md'),
                    help='the Markdown file to read (default: bench/RESULTS.md)')
    ap.add_argument('--out', default=os.path.join(HERE, 'data'),
                    help='directory for the CSV files (default: bench/data)')
    ap.add_argument('--bench-gpu', metavar='FILE',
                    help='write sgemm.csv, reduce.csv and spmv.csv from this CSV of '
                    '`bench_gpu --csv` instead (and nothing else)')
    a = ap.parse_args()
    if a.bench_gpu:
        tables = bench_gpu_tables(a.bench_gpu)
        os.makedirs(a.out, exist_ok=True)
        for fn in (sgemm, reduce_, spmv):
            print(fn(tables, a.out))
        return
    try:
        with open(a.results, encoding='utf-8') as f:
            tables = parse_tables(f.read())
    except OSError as e:
        sys.exit(f"results_csv: --results {a.results}: {e.strerror}")
    os.makedirs(a.out, exist_ok=True)
    for fn in (sgemm, reduce_, spmv, roundtrip, lanes):
        print(fn(tables, a.out))


if __name__ == '__main__':
    main()

#!/usr/bin/env python3
"""The HTML pages in a real browser: writes each kind of page (run, sweep, replay, goodput, and a
run of a workload with a hostile name), opens it in headless Chromium, and checks the DOM the
browser built: the page's script ran without errors, the Gantt chart has a row for every stream
the Perfetto timeline has, the scatter a point for every simulated plan, the bars and tables their
entries, the header figures equal the JSON report's, and nothing the workload's name holds became
an element. Takes a screenshot of each page (the test's artifacts, in OUTDIR). The same inputs give
the same bytes of HTML.

Usage: tests/html/check_pages.py TRAINSIM OUTDIR. Exit 77 (skipped, said loudly) without Chromium."""
import json
import math
import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser

binary, outdir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
browser = shutil.which('chromium') or shutil.which('chromium-browser')
if browser is None:
    print('SKIPPED: Chromium is not installed (tools/setup installs the Debian package "chromium"); '
          'the HTML pages were not checked in a browser')
    sys.exit(77)
os.makedirs(outdir, exist_ok=True)
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print(f'FAIL {what}')


def trainsim(*args):
    return subprocess.run([binary, *args], cwd=root, capture_output=True, check=False)


def chromium(*args):
    return subprocess.run([browser, '--headless=new', '--no-sandbox', '--disable-gpu', '--hide-scrollbars',
                           '--allow-file-access-from-files', *args], capture_output=True, text=True, timeout=120)


class Dom(HTMLParser):
    """The elements of the dumped DOM: tag, attributes, and the text inside each figure."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.elements = []
        self.text = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    def count(self, tag, css=None, **attrs):
        return sum(1 for t, a in self.elements
                   if t == tag and (css is None or css in a.get('class', '').split())
                   and all(a.get(k) == v for k, v in attrs.items()))

    def find(self, tag, **attrs):
        return [a for t, a in self.elements if t == tag and all(a.get(k) == v for k, v in attrs.items())]


def open_page(name, page):
    shutil.copy(page, os.path.join(outdir, f'{name}.html'))
    dumped = chromium('--dump-dom', f'file://{page}')
    check(dumped.returncode == 0, f'{name}: chromium --dump-dom exit {dumped.returncode}')
    dom = Dom()
    dom.feed(dumped.stdout)
    body = dom.find('body')
    check(bool(body) and body[0].get('data-ready') == 'yes', f'{name}: the page script did not finish')
    check(bool(body) and 'data-errors' not in body[0], f'{name}: script errors {body[0].get("data-errors") if body else "?"}')
    shot = chromium(f'--screenshot={os.path.join(outdir, name + ".png")}', '--window-size=1280,2000',
                    f'file://{page}')
    check(shot.returncode == 0 and os.path.getsize(os.path.join(outdir, name + '.png')) > 10000,
          f'{name}: no screenshot')
    return dom


def pointer(document, path):
    for part in path.strip('/').split('/'):
        document = document[int(part)] if isinstance(document, list) else document[part]
    return document


def check_figures(name, dom, report):
    figures = [a for t, a in dom.elements if t == 'div' and 'fig' in a.get('class', '').split() and 'data-value' in a]
    check(len(figures) >= 2, f'{name}: {len(figures)} header figures')
    for f in figures:
        expected = float(pointer(report, f['data-key']))
        shown = float(f['data-value'])
        check(abs(shown - expected) <= 1e-12 * max(1.0, abs(expected)),
              f'{name}: header {f["data-key"]} = {shown}, the JSON report says {expected}')


tmp = os.path.join(outdir, 'work')
os.makedirs(tmp, exist_ok=True)

# run: the README's first command, with its Perfetto timeline as the count of rows
RUN = ['run', '-t', 'topologies/dgx-a100-superpod.json', '-w', 'workloads/gpt3-175b.json',
       '-s', 'tp=8,pp=8,dp=16,sp=on,recompute=selective,schedule=interleaved,vpp=3']
page = os.path.join(tmp, 'run.html')
out = trainsim(*RUN, '--html', page, '--timeline', os.path.join(tmp, 'timeline.json'), '--format', 'json')
check(out.returncode == 0, f'run: exit {out.returncode}: {out.stderr.decode()[:300]}')
report = json.loads(out.stdout)
first = open(page, 'rb').read()
again = os.path.join(tmp, 'run-again.html')
trainsim(*RUN, '--html', again)
check(open(again, 'rb').read() == first, 'run: the same inputs wrote different HTML')
check(len(first) < 3 * 1024 * 1024, f'run: the page is {len(first)} bytes, over 3 MB')
timeline = json.load(open(os.path.join(tmp, 'timeline.json')))
threads = {(e['pid'], e['tid']) for e in timeline['traceEvents'] if e.get('ph') == 'X'}
dom = open_page('run', page)
check(dom.count('g', 'gantt-row') == len(threads),
      f'run: {dom.count("g", "gantt-row")} Gantt rows, the timeline has {len(threads)} streams with tasks')
check(dom.count('rect', 'bar') == 9 + 6, f'run: {dom.count("rect", "bar")} bars in the two stacked bars, expected 15')
check(dom.count('polyline', 'series') == 8, f'run: {dom.count("polyline", "series")} memory lines, expected 8 stages')
check(dom.count('tr') >= 2, 'run: no collectives table')
check_figures('run', dom, report)

# sweep: a point for every simulated plan, a bar for every pruned family
page = os.path.join(tmp, 'sweep.html')
out = trainsim('sweep', '-t', 'topologies/dgx-h100-superpod.json', '-w', 'workloads/llama3-8b.json', '--gpus', '64',
               '--top', '5', '--quiet', '--format', 'json', '--html', page)
check(out.returncode == 0, f'sweep: exit {out.returncode}')
report = json.loads(out.stdout)
dom = open_page('sweep', page)
check(dom.count('circle', 'point') == len(report['simulated']),
      f'sweep: {dom.count("circle", "point")} points, {len(report["simulated"])} simulated plans')
check(dom.count('circle', 'front') >= 1, 'sweep: no Pareto front')
check(dom.count('rect', 'bar') == len(report['pruned']), f'sweep: {dom.count("rect", "bar")} pruned bars')
check(len(dom.find('table', id='top')) == 1 and dom.count('tr') >= len(report['top']) + 1, 'sweep: ranking table')
check_figures('sweep', dom, report)

# the sweep's plane as the browser lays it out: axis titles clear of the tick labels, point labels
# clear of each other and of the ticks, tick values round (1, 2, 2.5 or 5 times a power of ten)
GEOMETRY = """<script>window.addEventListener('load', () => {
  const box = e => { const b = e.getBBox(); return {cls: e.getAttribute('class'), x0: b.x, y0: b.y, x1: b.x + b.width, y1: b.y + b.height}; };
  const texts = [...document.querySelectorAll('#scatter text')].map(box);
  const out = document.createElement('pre'); out.id = 'geometry'; out.textContent = JSON.stringify(texts);
  document.body.appendChild(out);
});</script>"""
measured = os.path.join(tmp, 'sweep-geometry.html')
open(measured, 'w').write(open(page).read().replace('</body>', GEOMETRY + '</body>'))
dumped = chromium('--dump-dom', f'file://{measured}')
geometry = Dom()
geometry.feed(dumped.stdout)
boxes = json.loads(next((t for t in geometry.text if t.startswith('[{')), '[]'))
check(len(boxes) >= 10, f'sweep: {len(boxes)} texts measured in the plane')


def overlap(a, b):
    return a['x0'] < b['x1'] and b['x0'] < a['x1'] and a['y0'] < b['y1'] and b['y0'] < a['y1']


kinds = {k: [b for b in boxes if (b['cls'] or '').startswith(k)] for k in ('title', 'tick', 'label')}
check(len(kinds['title']) == 2 and len(kinds['tick']) >= 6, f'sweep: {len(kinds["title"])} titles, {len(kinds["tick"])} ticks')
for title in kinds['title']:
    check(not any(overlap(title, t) for t in kinds['tick']), f'sweep: the axis title at {title} overlaps a tick label')
for i, a in enumerate(kinds['label']):
    for b in kinds['label'][i + 1:] + kinds['tick'] + kinds['title']:
        check(not overlap(a, b), f'sweep: point label {a} overlaps {b}')
for axis in ('x', 'y'):
    values = [float(a['data-value']) for t, a in dom.elements
              if t == 'text' and a.get('class') == f'tick {axis}' and 'data-value' in a]
    steps = {round(b - a, 12) for a, b in zip(values, values[1:])}
    check(len(values) >= 3 and len(steps) == 1, f'sweep: {axis} ticks {values} are not evenly spaced')
    if len(steps) == 1:
        step = steps.pop()
        mantissa = step / 10 ** math.floor(math.log10(step))
        check(any(abs(mantissa - m) < 1e-9 for m in (1, 2, 2.5, 5)), f'sweep: {axis} tick step {step} is not round')
        check(all(abs(v / step - round(v / step)) < 1e-6 for v in values), f'sweep: {axis} ticks {values} off the step')

# replay: a row and a bar per step
page = os.path.join(tmp, 'replay.html')
out = trainsim('replay', '--trace', 'tests/reference/traces/hta/nccl_parser_config_nccl_data.json.gz',
               '--compute-scale', '2', '--format', 'json', '--html', page)
check(out.returncode == 0, f'replay: exit {out.returncode}')
report = json.loads(out.stdout)
dom = open_page('replay', page)
check(dom.count('rect', 'bar') == len(report['steps']), f'replay: {dom.count("rect", "bar")} bars for {len(report["steps"])} steps')
check(dom.count('polyline', 'series') == 5, 'replay: step-time and GPU lines')
check_figures('replay', dom, report)

# goodput: a bar per cause
page = os.path.join(tmp, 'goodput.html')
out = trainsim('goodput', '-t', 'topologies/dgx-a100-superpod.json', '-w', 'workloads/gpt3-175b.json',
               '-s', 'tp=8,pp=8,dp=16,sp=on,recompute=selective,schedule=interleaved,vpp=3', '--tokens', '300e9',
               '--samples', '100', '--format', 'json', '--html', page)
check(out.returncode == 0, f'goodput: exit {out.returncode}')
report = json.loads(out.stdout)
dom = open_page('goodput', page)
check(dom.count('rect', 'bar') == 5 + len(report['interruptions_by_cause']), 'goodput: bars')
check_figures('goodput', dom, report)

# a hostile workload name: markup, quotes and ampersands stay text (the spec readers refuse bytes
# that are not UTF-8; html::escape's own test replaces them)
hostile = json.load(open(os.path.join(root, 'workloads', 'megatron2020-1b.json')))
hostile['name'] = '<script>alert(1)</script><img src=x onerror=alert(2)> "q" & \'a\''
workload = os.path.join(tmp, 'hostile.json')
open(workload, 'w').write(json.dumps(hostile))
page = os.path.join(tmp, 'hostile.html')
out = trainsim('run', '-t', 'topologies/dgx-a100-superpod.json', '-w', workload, '-s', 'tp=1,gpus=8', '--html', page)
check(out.returncode == 0, f'hostile: exit {out.returncode}: {out.stderr.decode()[:200]}')
dom = open_page('hostile', page)
check(dom.count('script') == 1, f'hostile: {dom.count("script")} script elements, the page has one')
check(dom.count('img') == 0, 'hostile: an injected img element')
check(any('<script>alert(1)</script>' in t for t in dom.text), 'hostile: the name is not shown as text')

print(f'{len(failures)} failed; pages and screenshots in {outdir}')
sys.exit(1 if failures else 0)

#!/usr/bin/env python3
"""Writes the bad-input catalogue under tests/cli/cases/: one directory per case with `args`, `exit`
and `stderr` (the exact expected message), plus the hostile input files it reads. `@` in args and
stderr stands for the case's own directory. tests/cli/run_cases.sh runs the catalogue."""
import json, os, shutil
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
cases_dir = f'{root}/tests/cli/cases'
shutil.rmtree(cases_dir, ignore_errors=True)
os.makedirs(cases_dir)
A100 = json.load(open(f'{root}/topologies/dgx-a100-superpod.json'))
GPT = json.load(open(f'{root}/workloads/gpt3-175b.json'))
T = 'topologies/dgx-a100-superpod.json'
W = 'workloads/gpt3-175b.json'
GB200 = 'topologies/gb200-nvl72.json'
def case(name, args, exit_code, stderr, files=None):
    d = f'{cases_dir}/{name}'
    os.makedirs(d)
    base = f'tests/cli/cases/{name}'
    for fname, content in (files or {}).items():
        mode = 'wb' if isinstance(content, bytes) else 'w'
        os.makedirs(os.path.dirname(f'{d}/{fname}'), exist_ok=True)
        with open(f'{d}/{fname}', mode) as f:
            f.write(content if isinstance(content, (str, bytes)) else json.dumps(content, indent=2) + '\n')
    args = args.replace('@', base + '/')
    stderr = stderr.replace('@', base + '/')
    open(f'{d}/args', 'w').write(args + '\n')
    open(f'{d}/exit', 'w').write(f'{exit_code}\n')
    open(f'{d}/stderr', 'w').write(stderr + '\n')
def topo(**changes):
    t = json.loads(json.dumps(A100))
    if isinstance(t['device'], str):  # a catalogue name: the device written inline, so cases can break it
        with open(f"devices/{t['device']}.json") as f:
            t['device'] = {k: v for k, v in json.load(f).items() if k not in ('sources', 'kernels', 'collectives')}
    for path, value in changes.items():
        keys = path.split('__'); node = t
        for k in keys[:-1]: node = node[k]
        if value is DELETE: del node[keys[-1]]
        else: node[keys[-1]] = value
    return t
def work(**changes):
    w = json.loads(json.dumps(GPT))
    for path, value in changes.items():
        keys = path.split('__'); node = w
        for k in keys[:-1]: node = node[k]
        if value is DELETE: del node[keys[-1]]
        else: node[keys[-1]] = value
    return w
DELETE = object()
RUN = f'run -t {T} -w {W} -s'

case('json-trailing-comma', f'run -t @t.json -w {W} -s tp=8', 2,
     'error: @t.json: invalid JSON at line 1, column 14: syntax error while parsing object key - unexpected \'}\'; expected string literal',
     {'t.json': '{"name": "x",}'})
case('json-truncated', f'run -t @t.json -w {W} -s tp=8', 2,
     'error: @t.json: invalid JSON at line 1, column 26: syntax error while parsing object key - unexpected end of input; expected string literal',
     {'t.json': '{"name": "x", "device": {'})
case('json-empty-file', f'run -t {T} -w @w.json -s tp=8', 2,
     'error: @w.json: file is empty; expected a JSON object',
     {'w.json': ''})
case('json-nan-literal', f'run -t {T} -w @w.json -s tp=8', 2,
     'error: @w.json: invalid JSON at line 1, column 1: syntax error while parsing value - invalid literal; last read: \'N\'',
     {'w.json': 'NaN'})
case('json-binary-garbage', f'run -t {T} -w @w.json -s tp=8', 2,
     'error: @w.json: not a JSON text: NUL byte at offset 0',
     {'w.json': b'\x00\x01\x02\xff\xfe'})
case('json-duplicate-key', f'run -t @t.json -w {W} -s tp=8', 2,
     'error: @t.json: /device/memory: duplicate key',
     {'t.json': '{"name": "x", "device": {"memory": "80 GiB", "memory": "40 GiB"}}'})
case('json-deep-nesting', f'run -t {T} -w @w.json -s tp=8', 2,
     'error: @w.json: /name' + '/0' * 62 + ': invalid JSON: nested deeper than 64 levels',
     {'w.json': '{"name": ' + '[' * 200 + ']' * 200 + '}'})
case('top-level-array', f'run -t {T} -w @w.json -s tp=8', 2,
     'error: @w.json: expected a JSON object, got a list', {'w.json': '[1, 2]'})
case('missing-file', f'run -t @nope.json -w {W} -s tp=8', 2,
     'error: @nope.json: cannot open: No such file or directory', {'.keep': ''})
case('directory-as-file', f'run -t tests/cli/cases/directory-as-file -w {W} -s tp=8', 2,
     'error: tests/cli/cases/directory-as-file: cannot read: not a regular file', {'.keep': ''})
case('unit-unknown', f'run -t @t.json -w {W} -s tp=8', 2,
     'error: @t.json: /device/memory: unknown unit "GiBs" in "80 GiBs"; expected one of: B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB',
     {'t.json': topo(device__memory='80 GiBs')})
case('unit-bits-for-size', f'run -t @t.json -w {W} -s tp=8', 2,
     'error: @t.json: /network/nic_bandwidth: unknown unit "Gb" in "200 Gb"; expected one of: B/s, KB/s, MB/s, GB/s, TB/s, KiB/s, MiB/s, GiB/s, b/s, Kb/s, Mb/s, Gb/s, Tb/s, Gbps, Mbps, Tbps, GBps',
     {'t.json': topo(network__nic_bandwidth='200 Gb')})
case('size-negative', f'run -t @t.json -w {W} -s tp=8', 2,
     'error: @t.json: /device/memory: "-80 GiB" does not start with a non-negative number; expected a size such as "80 GiB"',
     {'t.json': topo(device__memory='-80 GiB')})
case('size-too-small', f'run -t @t.json -w {W} -s tp=8', 2,
     'error: @t.json: /device/memory: 0 bytes is outside what a device\'s memory can be (1 GiB to 1 TiB)',
     {'t.json': topo(device__memory=0)})
case('nic-bandwidth-bare-number', f'run -t @t.json -w {W} -s tp=8', 2,
     'error: @t.json: /network/nic_bandwidth: 400 bytes/s is outside what a NIC\'s bandwidth can be (1 Gb/s to 3.2 Tb/s): did you mean "400 Gb/s"?',
     {'t.json': topo(network__nic_bandwidth=400)})
# a plausible number in the wrong unit (bytes for bits, 8x too fast) runs, with a warning on stderr
case('nic-bandwidth-bytes-for-bits', f'run -t @t.json -w {W} -s tp=8,pp=8,gpus=64,sp=on,recompute=full --analytic', 0,
     'warning: /network/nic_bandwidth: 400 GB/s is unusual for a NIC\'s bandwidth (usually 10 Gb/s to 800 Gb/s): did you mean "400 Gb/s"?',
     {'t.json': {**A100, 'network': {**A100['network'], 'nic_bandwidth': '400 GB/s'}}})
# an ideal network for a what-if study: refused unless the file says so, kept (with warnings) when it does
case('nic-bandwidth-ideal-needs-what-if', f'run -t @t.json -w {W} -s tp=8', 2,
     'error: @t.json: /network/nic_bandwidth: 1000000 GB/s is outside what a NIC\'s bandwidth can be (1 Gb/s to '
     '3.2 Tb/s); a what-if study beyond today\'s hardware says so with "what_if": true at the top of the file',
     {'t.json': topo(network__nic_bandwidth='1000000 GB/s')})
case('nic-bandwidth-ideal-what-if', f'run -t @t.json -w {W} -s tp=8,pp=8,gpus=64,sp=on,recompute=full --analytic', 0,
     'warning: @t.json: a what-if topology ("what_if": true): figures beyond what hardware can be are kept as given\n'
     'warning: /network/nic_bandwidth: 1000000 GB/s is outside what a NIC\'s bandwidth can be (1 Gb/s to 3.2 Tb/s): '
     'kept, the file is a what-if study ("what_if": true)',
     {'t.json': {**A100, 'what_if': True, 'network': {**A100['network'], 'nic_bandwidth': '1000000 GB/s'}}})
case('bandwidth-zero', f'run -t @t.json -w {W} -s tp=8', 2,
     'error: @t.json: /network/nic_bandwidth: 0 Gb/s is outside what a NIC\'s bandwidth can be (1 Gb/s to 3.2 Tb/s)',
     {'t.json': topo(network__nic_bandwidth='0 Gb/s')})
case('wrong-type-nodes', f'run -t @t.json -w {W} -s tp=8', 2,
     'error: @t.json: /nodes: expected an integer in [1, 4194304], got "128"',
     {'t.json': topo(nodes='128')})
case('absurd-node-count', f'run -t @t.json -w {W} -s tp=8', 2,
     'error: @t.json: /nodes: 1e+30 is out of range; expected an integer in [1, 4194304]',
     {'t.json': topo(nodes=1e30)})
case('switch-radix-beyond-any-switch', f'run -t @t.json -w {W} -s tp=8', 2,
     'error: @t.json: /network/leaf_radix: 4096 is out of range; expected an integer in [2, 1024]',
     {'t.json': topo(network__leaf_radix=4096, network__tiers=3)})
case('planes-not-dividing-nics', f'run -t @t.json -w {W} -s tp=8', 2,
     'error: @t.json: /network/planes: 3 planes do not divide the node\'s 8 NICs',
     {'t.json': topo(network__planes=3)})
case('unknown-key-typo', f'run -t @t.json -w {W} -s tp=8', 2,
     'error: @t.json: /network/nics_per_nod: unknown key "nics_per_nod" (did you mean "nics_per_node"?)\nerror: @t.json: /network/nics_per_node: missing; expected an integer in [1, 4608]',
     {'t.json': topo(network__nics_per_nod=8, network__nics_per_node=DELETE)})
case('unknown-network-kind', f'run -t @t.json -w {W} -s tp=8', 2,
     'error: @t.json: /network/kind: "fattree" is not valid; expected one of: leaf_spine, torus, none',
     {'t.json': topo(network__kind='fattree')})
case('torus-with-nodes', f'run -t @t.json -w {W} -s tp=8', 2,
     'error: @t.json: /node: not used with a torus network: its dims give the devices\nerror: @t.json: /nodes: not used with a torus network: its dims give the devices',
     {'t.json': topo(network={"kind": "torus", "dims": [4, 4], "link_bandwidth": "50 GB/s", "latency": "2 us"})})
case('link-kind-unknown', f'run -t @t.json -w {W} -s tp=8', 2,
     'error: @t.json: /node/fabric/link: unknown link "nvlink9"; the link catalogue holds: dcn-100, dcn-200, ib-hdr, ib-ndr, ib-xdr, ici-v4, ici-v5p, ici-v6e, ici-v7, nvlink3, nvlink4, nvlink5, pcie4, pcie5, roce-200, roce-400, roce-800, xgmi-mi300 (did you mean "nvlink3"?)',
     {'t.json': topo(node__fabric={"kind": "nvswitch", "link": "nvlink9"})})
case('link-kind-wrong-scope', f'run -t @t.json -w {W} -s tp=8', 2,
     'error: @t.json: /network/link: "nvlink4" is a fabric link, not a network link; network links: dcn-100, dcn-200, ib-hdr, ib-ndr, ib-xdr, roce-200, roce-400, roce-800',
     {'t.json': topo(network__link="nvlink4")})
case('domain-larger-than-its-switches', f'run -t @t.json -w {W} -s tp=8', 2,
     'error: @t.json: /node/fabric/switches: 8 devices of 18 links need 144 switch ports; 2 switches of 64 ports have 128',
     {'t.json': topo(node__fabric={"kind": "nvswitch", "link": "nvlink4", "switches": 2, "switch_ports": 64})})
case('nics-not-dividing-trays', f'run -t @t.json -w {W} -s tp=8', 2,
     'error: @t.json: /network/nics_per_node: 2 NICs cannot be shared evenly by the node\'s 4 hosts of 2 devices',
     {'t.json': topo(node__host={"devices": 2}, network__nics_per_node=2)})
case('device-fp8-gemm-layouts', f'run -t @t.json -w {W} -s tp=8', 2,
     'error: @t.json: /device/fp8_gemm_layouts: "nt" is not valid; expected one of: tn, all (did you mean "tn"?)',
     {'t.json': topo(device__fp8_gemm_layouts="nt")})
case('device-power-limit-below-half-tdp', f'run -t @t.json -w {W} -s tp=8', 2,
     'error: @t.json: /device/power_limit: 150 W is below half the device\'s tdp (400 W): the clock model '
     '(docs/model.md "Clocks under a power limit") holds from there up',
     {'t.json': topo(device__power_limit="150 W")})
case('segment-larger-than-node', f'run -t {GB200} -w {W} -s tp=4,gpus=64,segment=20', 2,
     'error: strategy "tp=4,gpus=64,segment=20": /segment: 20 hosts per node requested, but a node of topology "gb200-nvl72" has 18 (hosts of 4 devices)',
     {})
case('dualpipev-needs-vpp-2', f'run -t {T} -w {W} -s pp=8,schedule=dualpipev,gpus=64', 2,
     'error: strategy "pp=8,schedule=dualpipev,gpus=64": /vpp: dualpipev holds two model chunks per stage (the V): vpp must be 2, not 1',
     {})
case('dualpipev-too-few-microbatches', f'run -t {T} -w {W} -s tp=8,pp=8,vpp=2,schedule=dualpipev,gpus=4096,mb=2', 2,
     'error: strategy "tp=8,pp=8,vpp=2,schedule=dualpipev,gpus=4096,mb=2": /schedule: dualpipev needs at least 2·pp = 16 micro-batches, not 12',
     {})
case('many-errors-at-once', f'run -t @t.json -w {W} -s tp=8', 2,
     'error: @t.json: /device/sms: expected an integer in [1, 100000], got 1.5\nerror: @t.json: /name: missing; expected a string\nerror: @t.json: /node/devices: 0 is out of range; expected an integer in [1, 576]',
     {'t.json': topo(name=DELETE, device__sms=1.5, node__devices=0)})
case('workload-kv-heads', f'run -t {T} -w @w.json -s tp=8', 2,
     'error: @w.json: /model/kv_heads: 7 does not divide heads (96)',
     {'w.json': work(model__kv_heads=7)})
case('workload-zero-layers', f'run -t {T} -w @w.json -s tp=8', 2,
     'error: @w.json: /model/layers: 0 is out of range; expected an integer in [1, 10000]',
     {'w.json': work(model__layers=0)})
case('workload-unknown-mlp', f'run -t {T} -w @w.json -s tp=8', 2,
     'error: @w.json: /model/mlp: "geglu" is not valid; expected one of: gelu, swiglu (did you mean "gelu"?)',
     {'w.json': work(model__mlp='geglu')})
case('workload-missing-training', f'run -t {T} -w @w.json -s tp=8', 2,
     'error: @w.json: /training: missing; expected an object with seq_len, global_batch, dtype, optimizer',
     {'w.json': work(training=DELETE)})
case('workload-dtype-not-on-device', f'run -t {T} -w @w.json -s tp=8,gpus=64', 2,
     f'error: @w.json: /training/dtype: fp8 has no peak_flops entry for device "A100-SXM4-80GB" in {T}',
     {'w.json': work(training__dtype='fp8')})
case('device-collective-engine', 'run -t @t.json -w workloads/gpt3-175b.json -s tp=8', 2,
     'error: @t.json: /device/collective_engine: "rdma" is not valid; expected one of: cores, dma (did you mean "dma"?)',
     {'t.json': topo(device__collective_engine='rdma')})
case('workload-lora-unknown-module', f'run -t {T} -w @w.json -s tp=8', 2,
     'error: @w.json: /training/lora/modules/1: "lm_head" is not one of qkv, out_proj, fc1, fc2',
     {'w.json': work(training__lora={'rank': 16, 'modules': ['qkv', 'lm_head']})})
case('workload-lora-rank-zero', f'run -t {T} -w @w.json -s tp=8', 2,
     'error: @w.json: /training/lora/modules: expected a non-empty array of qkv, out_proj, fc1, fc2\n'
     'error: @w.json: /training/lora/rank: 0 is out of range; expected an integer in [1, 65536]',
     {'w.json': work(training__lora={'rank': 0, 'modules': []})})
case('workload-lora-with-mtp', f'run -t {T} -w @w.json -s tp=8', 2,
     'error: @w.json: /training/lora: LoRA is modelled on the model\'s layers; this model has multi-token prediction '
     'modules (model.mtp_layers), whose adapters are not placed',
     {'w.json': work(model__mtp_layers=1, training__lora={'rank': 16, 'modules': ['qkv']})})
case('workload-lora-on-experts', 'run -t topologies/dgx-h100-superpod.json -w @w.json -s ep=8,gpus=8', 2,
     'error: @w.json: /training/lora: LoRA is modelled on dense layers (qkv, out_proj, fc1, fc2); this model has experts',
     {'w.json': dict(json.load(open(f'{root}/workloads/qwen3-30b-a3b.json')),
                     training=dict(json.load(open(f'{root}/workloads/qwen3-30b-a3b.json'))['training'],
                                   lora={'rank': 16, 'modules': ['qkv']}))})
case('workload-huge-seq', f'run -t {T} -w @w.json -s tp=8', 2,
     'error: @w.json: /training/seq_len: 1000000000000 is out of range; expected an integer in [1, 16777216]',
     {'w.json': work(training__seq_len=10**12)})
case('strategy-tp-heads', f'{RUN} tp=7,gpus=7', 2,
     'error: strategy "tp=7,gpus=7": /tp: 7 does not divide heads (96) of workload "gpt3-175b"\nerror: strategy "tp=7,gpus=7": /tp: 7 and kv_heads (96) must divide one another\nerror: strategy "tp=7,gpus=7": /tp: 7 does not divide ffn_hidden (49152)')
case('strategy-degree-product', f'{RUN} tp=8,pp=8,dp=16,gpus=512', 2,
     'error: strategy "tp=8,pp=8,dp=16,gpus=512": /dp: tp·cp·pp·dp = 8·1·8·16 = 1024 but gpus = 512')
case('strategy-too-many-gpus', f'{RUN} tp=8,gpus=1000000000000000000000000000000', 2,
     'error: strategy "tp=8,gpus=1000000000000000000000000000000": /gpus: 1e+30 is out of range; expected an integer in [1, 4194304]')
case('strategy-more-than-topology', f'{RUN} tp=8,pp=8,dp=128', 2,
     'error: strategy "tp=8,pp=8,dp=128": /dp: 8192 GPUs requested but topology "dgx-a100-superpod" has 4480 devices')
case('strategy-malformed-item', f'{RUN} tp8,pp=2', 2,
     'error: strategy "tp8,pp=2": "tp8" is not of the form key=value')
case('strategy-unknown-schedule', f'{RUN} tp=8,schedule=1f1f,gpus=8', 2,
     'error: strategy "tp=8,schedule=1f1f,gpus=8": /schedule: "1f1f" is not valid; expected one of: gpipe, 1f1b, interleaved, zb-h1, dualpipev (did you mean "1f1b"?)')
case('strategy-file-wrong-type', f'run -t {T} -w {W} -s @s.json', 2,
     'error: @s.json: /sp: 3 is not valid; expected one of: on, off, true, false\nerror: @s.json: /zero: expected an integer in [0, 3], got "one"',
     {'s.json': {"tp": 8, "sp": 3, "zero": "one"}})
case('strategy-interleaved-needs-vpp', f'{RUN} tp=8,pp=8,gpus=64,schedule=interleaved', 2,
     'error: strategy "tp=8,pp=8,gpus=64,schedule=interleaved": /vpp: the interleaved schedule needs vpp of at least 2')
case('strategy-batch-divisibility', f'{RUN} tp=8,pp=8,dp=16,mb=5', 2,
     'error: strategy "tp=8,pp=8,dp=16,mb=5": /mb: global batch 1536 is not divisible by dp·mb = 16·5 = 80')
case('strategy-ep-without-experts', f'{RUN} tp=8,ep=2,gpus=16', 2,
     'error: strategy "tp=8,ep=2,gpus=16": /ep: 2 needs a mixture-of-experts model; workload "gpt3-175b" has none')
case('strategy-negative-mb', f'{RUN} tp=8,mb=-1', 2,
     'error: strategy "tp=8,mb=-1": /mb: -1 is out of range; expected an integer in [1, 1073741824]')
case('strategy-unknown-cp-comm', f'{RUN} tp=8,cp=2,gpus=16,cp_comm=rings', 2,
     'error: strategy "tp=8,cp=2,gpus=16,cp_comm=rings": /cp_comm: "rings" is not valid; expected one of: all_gather, ring (did you mean "ring"?)')
case('cli-missing-workload', f'run -t {T} -s tp=8', 2,
     'error: command line: run needs -w WORKLOAD (or a launch configuration: --megatron-args, --torchtitan, -s megatron:ARGS)')
case('cli-unknown-subcommand', 'fly', 2,
     'error: command line: unknown command "fly"; expected one of: run, collective, sweep, trace, replay, calibrate, regress, tunables, goodput')
case('cli-bad-format', f'{RUN} tp=8 --format xml', 2,
     'error: command line: --format: xml not in {table,json,csv}')
case('does-not-fit', f'{RUN} tp=1,gpus=8', 1,
     'does not fit: peak 2.94 TiB per GPU exceeds the device\'s 79.15 GiB')

# collective command
CT = 'collective -t topologies/dgx-a100-superpod.json'
case('collective-bad-op', f'{CT} --op allreduce --bytes 1GiB', 2,
     'error: command line: --op: allreduce not in {all_reduce,reduce_scatter,all_gather,broadcast,reduce,all_to_all,send_recv}')
case('collective-bad-bytes', f'{CT} --op all_reduce --bytes 1XB', 2,
     'error: --bytes: unknown unit "XB" in "1XB"; expected one of: B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB')
case('collective-zero-bytes', f'{CT} --op all_reduce --bytes 0', 2,
     'error: --bytes: 0 is out of range; expected a size from 1 B to 1 PB')
case('collective-fractional-bytes', f'{CT} --op all_reduce --bytes 1.5', 2,
     'error: --bytes: 1.5 is not a whole number of bytes')
case('collective-no-size', f'{CT} --op all_reduce', 2,
     'error: command line: give --bytes SIZE or --sweep MIN:MAX')
case('collective-sweep-backwards', f'{CT} --op all_reduce --sweep 1GiB:1KiB', 2,
     'error: --sweep: "1GiB:1KiB" runs backwards')
case('collective-group-out-of-range', f'{CT} --op all_reduce --bytes 1GiB --group 0-9999', 2,
     'error: --group: "9999" is not a device index in [0, 4479]')
case('collective-unknown-algo', f'{CT} --op all_reduce --bytes 1GiB --group 0-7 --algo rign', 2,
     'error: --algo: unknown algorithm "rign"; expected one of: auto, ring, tree, hier, nvls, sharp, torus, direct')
case('collective-algo-cannot-run', f'{CT} --op all_reduce --bytes 1GiB --group 0-7 --algo torus', 2,
     'error: --group: algorithm "torus" cannot run all_reduce on this group of 8 devices')
case('collective-send-recv-needs-two', f'{CT} --op send_recv --bytes 1GiB --group 0-3', 2,
     'error: --group: no algorithm models send_recv on a group of 4 devices')
case('collective-bad-strategy', f'{CT} --op all_reduce --bytes 1GiB --group dp -s tp=3', 2,
     'error: strategy "tp=3": tp·cp·pp = 3 does not divide the 4480 devices used')

# regress command: each case directory is itself the results directory
A100_RUN = {"topology": T, "workload": W, "strategy": "tp=8,pp=8,dp=2,mb=1"}
case('regress-not-a-directory', 'regress tests/cli/cases/nope', 2,
     'error: tests/cli/cases/nope: not a directory')
case('regress-neither-run-nor-collective', 'regress @', 2,
     'error: @case.json: expected exactly one of "run" and "collective"',
     {'case.json': {"name": "x", "expect": {"/step_time_s": {"measured": 1, "tolerance": 0.1}}}})
case('regress-negative-tolerance', 'regress @', 2,
     'error: @case.json: /expect/~1step_time_s/tolerance: -1 is out of range; expected a value in [0, 100]',
     {'case.json': {"name": "x", "run": A100_RUN, "expect": {"/step_time_s": {"measured": 1, "tolerance": -1}}}})
case('regress-missing-input-file', 'regress @', 2,
     'error: @case.json: /run/topology: tests/cli/cases/nope.json: cannot open: No such file or directory',
     {'case.json': {"name": "x", "run": dict(A100_RUN, topology="nope.json"),
                    "expect": {"/step_time_s": {"measured": 1, "tolerance": 0.1}}}})
case('regress-not-a-pointer', 'regress @', 2,
     'error: @case.json: /expect/step_time_s: "step_time_s" is not a JSON pointer (expected "/field" or "/a + /b")',
     {'case.json': {"name": "x", "run": dict(A100_RUN, topology="../../../" + T, workload="../../../" + W),
                    "expect": {"step_time_s": {"measured": 1, "tolerance": 0.1}}}})
case('regress-field-not-in-report', 'regress @', 2,
     'error: @case.json: /expect/~1step_time: the report has no number at /step_time',
     # 48 micro-batches: the report is simulated before its fields are looked up
     {'case.json': {"name": "x", "run": dict(A100_RUN, topology="../../../" + T, workload="../../../" + W,
                                             strategy="tp=8,pp=8,dp=2,mb=16"),
                    "expect": {"/step_time": {"measured": 1, "tolerance": 0.1}}}})

# sweep command
SW = f'sweep -t {T} -w {W}'
case('sweep-bad-shard', f'{SW} --shard 3/3', 2,
     'error: --shard: "3/3" is not I/N with 0 ≤ I < N (for example 0/4)')
case('sweep-gpus-beyond-topology', f'{SW} --gpus 1024,99999', 2,
     'error: --gpus: 99999 is not a device count in [1, 4480] of topology "dgx-a100-superpod"')
case('sweep-unknown-objective', f'{SW} --rank-by speed', 2,
     'error: --rank-by: "speed" is not valid; expected one of: step_time, tokens_per_s, cost')
case('sweep-fix-typo', f'{SW} --fix tq=8', 2,
     'error: --fix: /tq: unknown key "tq" (did you mean "tp"?)')
case('memory-headroom-out-of-range', f'{RUN} tp=8,gpus=8 --memory-headroom 2', 2,
     'error: command line: --memory-headroom: Value 2 not in range 0.000000 to 0.900000')
case('strategy-key-in-capitals', f'{RUN} TP=8,gpus=8', 2,
     'error: strategy "TP=8,gpus=8": /TP: unknown key "TP" (did you mean "tp"?)')
case('strategy-key-far-from-any', f'{RUN} tp=8,gpus=8,speed=max', 2,
     'error: strategy "tp=8,gpus=8,speed=max": /speed: unknown key "speed"; valid keys: allocator, attention, backward_prefetch, bias_grad, compile, cp, '
     'cp_comm, dispatcher, dp, ep, ep_overlap, etp, first_stage_layers, fp8, fp8_param_gather, fp8_tp_gather, fp8_transpose_cache, framework, fsdp_version, gpus, grad_reduce_dtype, '
     'last_stage_layers, launch, limit_all_gathers, loss, mb, norm_grad, offload_layers, optimizer_impl, order, overlap_grad_reduce, overlap_moe_comm, '
     'overlap_param_gather, pipeline_layout, pp, recompute, recompute_layers, '
     'recompute_method, recompute_modules, recompute_period, remat_to_fit, repeat_kv, reshard_after_forward, schedule, segment, sources, sp, sp_saves_gathered, tp, tp_overlap, '
     'vpp, zero, zero3_gather, zero3_list_io, zero3_max_reuse_distance, zero3_persistence_threshold, zero3_sync, zero_group')
# DeepSpeed's ways with ZeRO-3 (docs/model.md "DeepSpeed's stage 3")
case('strategy-zero3-gather-without-zero3', f'{RUN} gpus=8,zero=1,zero3_gather=parameter', 2,
     'error: strategy "gpus=8,zero=1,zero3_gather=parameter": /zero3_gather: applies under zero=3 (it sets how ZeRO-3 '
     'gathers parameters); zero is 1')
case('strategy-zero3-gather-unknown', f'{RUN} gpus=8,zero=3,zero3_gather=layer', 2,
     'error: strategy "gpus=8,zero=3,zero3_gather=layer": /zero3_gather: "layer" is not valid; expected one of: '
     'unit, module, parameter')
case('strategy-deepspeed-zero3-with-pp', f'{RUN} framework=deepspeed,pp=2,gpus=16', 2,
     'error: strategy "framework=deepspeed,pp=2,gpus=16": /zero: framework=deepspeed runs ZeRO-1 at most under '
     'pipeline parallelism (pp = 2): give zero=1 or less, or pp=1')
case('strategy-zero3-persistence-negative', f'{RUN} gpus=8,zero=3,zero3_persistence_threshold=-1', 2,
     'error: strategy "gpus=8,zero=3,zero3_persistence_threshold=-1": /zero3_persistence_threshold: -1 is out of range; '
     'expected an integer in [0, 1099511627776]')
# host overhead and the framework keys of issue 27 (docs/model.md "Host overhead")
case('strategy-backward-prefetch-unknown', f'{RUN} tp=8,gpus=8,zero=3,backward_prefetch=early', 2,
     'error: strategy "tp=8,gpus=8,zero=3,backward_prefetch=early": /backward_prefetch: "early" is not valid; expected '
     'one of: pre, post, none')
case('strategy-backward-prefetch-without-zero3', f'{RUN} tp=8,gpus=8,zero=1,backward_prefetch=none', 2,
     'error: strategy "tp=8,gpus=8,zero=1,backward_prefetch=none": /backward_prefetch: applies under zero=3 (it times '
     'FSDP\'s parameter gathers); zero is 1')
# Megatron-Core's pipeline layouts (docs/cli.md "Strategy": pipeline_layout)
for name, strategy, message in (
        ('strategy-pipeline-layout-symbol', 'tp=8,pp=2,gpus=16,pipeline_layout=Et*48|t*48X',
         '/pipeline_layout: "Et*48|t*48X": \'X\' is not a layer symbol (E embedding, t transformer layer, m '
         'multi-token prediction module, L loss; | between stages, x*n and (...)*n repeat, commas are ignored)'),
        ('strategy-pipeline-layout-layers', 'tp=8,pp=2,gpus=16,pipeline_layout=Et*48|t*47L',
         '/pipeline_layout: "Et*48|t*47L": 95 transformer layers t, but the model has 96'),
        ('strategy-pipeline-layout-stages', 'tp=8,pp=4,gpus=32,pipeline_layout=Et*48|t*48L',
         '/pipeline_layout: "Et*48|t*48L": 2 virtual stages, which pp = 4 does not divide (the layout gives pp·vpp '
         'stages)'),
        ('strategy-pipeline-layout-module', 'tp=8,pp=2,gpus=16,pipeline_layout=Et*48|t*48mL',
         '/pipeline_layout: "Et*48|t*48mL": 1 multi-token prediction module m, but the model has 0')):
    case(name, f'{RUN} {strategy}', 2, f'error: strategy "{strategy}": {message}')
case('strategy-pipeline-layout-and-first-stage', f'{RUN} tp=8,pp=2,gpus=16,first_stage_layers=48,pipeline_layout=Et*48|t*48L', 2,
     'error: strategy "tp=8,pp=2,gpus=16,first_stage_layers=48,pipeline_layout=E...": /first_stage_layers: '
     'pipeline_layout gives every stage its layers: give it or the outer stages\' counts, not both')
case('strategy-pipeline-layout-inline-comma', f'{RUN} tp=8,pp=2,gpus=16,pipeline_layout=Et*48,|t*48L', 2,
     'error: strategy "tp=8,pp=2,gpus=16,pipeline_layout=Et*48,|t*48L": "|t*48L" is not of the form key=value (a '
     'pipeline_layout\'s commas are cosmetic: leave them out of an inline list)')
case('strategy-fp8-tp-gather-without-fp8', f'{RUN} tp=8,sp=on,gpus=8,fp8_tp_gather=on', 2,
     'error: strategy "tp=8,sp=on,gpus=8,fp8_tp_gather=on": /fp8_tp_gather: fp8_tp_gather=on needs an FP8 recipe '
     '(fp8=tensorwise, or training.dtype fp8)')
case('strategy-launch-unknown', f'{RUN} tp=8,gpus=8,launch=graphs', 2,
     'error: strategy "tp=8,gpus=8,launch=graphs": /launch: "graphs" is not valid; expected one of: eager, compiled, cuda_graphs')
case('strategy-optimizer-impl-unknown', f'{RUN} tp=8,gpus=8,optimizer_impl=fast', 2,
     'error: strategy "tp=8,gpus=8,optimizer_impl=fast": /optimizer_impl: "fast" is not valid; expected one of: fused, foreach, for_loop')
case('strategy-bias-grad-unknown', f'{RUN} tp=8,gpus=8,bias_grad=epilogue', 2,
     'error: strategy "tp=8,gpus=8,bias_grad=epilogue": /bias_grad: "epilogue" is not valid; expected one of: separate, fused')
case('strategy-norm-grad-unknown', f'{RUN} tp=8,gpus=8,norm_grad=on', 2,
     'error: strategy "tp=8,gpus=8,norm_grad=on": /norm_grad: "on" is not valid; expected one of: separate, fused')
case('strategy-limit-all-gathers-not-a-switch', f'{RUN} tp=8,gpus=8,limit_all_gathers=2', 2,
     'error: strategy "tp=8,gpus=8,limit_all_gathers=2": /limit_all_gathers: 2 is not valid; expected one of: on, off, true, false')
case('calibration-host-launch-negative', f'{RUN} tp=8,gpus=8 --calibration @c.json', 2,
     'error: @c.json: /host/eager_launch: "-3 us" does not start with a non-negative number; expected a duration such as "2 us"', {'c.json': {'host': {'eager_launch': '-3 us'}}})
# checkpointing policies (docs/model.md "Checkpointing policies")
R64 = f'run -t {T} -w {W} -s tp=8,pp=8,gpus=64'
case('recompute-module-unknown', f'{R64},recompute=selective,recompute_modules=core_attn+mlpp', 2,
     'error: strategy "tp=8,pp=8,gpus=64,recompute=selective,recompute_modules=c...": /recompute_modules: "mlpp" is '
     "not a module selective recomputation knows; expected names joined by '+' from: core_attn, layernorm, mlp, moe, "
     'moe_act, shared_experts, mla_up_proj')
case('recompute-module-twice', f'{R64},recompute=selective,recompute_modules=mlp+mlp', 2,
     'error: strategy "tp=8,pp=8,gpus=64,recompute=selective,recompute_modules=m...": /recompute_modules: "mlp" '
     'appears twice in "mlp+mlp"')
case('recompute-modules-without-selective', f'{R64},recompute=full,recompute_modules=mlp', 2,
     'error: strategy "tp=8,pp=8,gpus=64,recompute=full,recompute_modules=mlp": /recompute_modules: recompute_modules '
     'needs recompute=selective (they are what it recomputes), not full')
case('recompute-period-beyond-chunk', f'{R64},recompute=full,recompute_period=13', 2,
     'error: strategy "tp=8,pp=8,gpus=64,recompute=full,recompute_period=13": /recompute_period: 13 exceeds the 12 '
     "layers of stage 0's model chunks: no layer would be recomputed there (at most 12)")
case('recompute-period-without-full', f'{R64},recompute=op,recompute_period=2', 2,
     'error: strategy "tp=8,pp=8,gpus=64,recompute=op,recompute_period=2": /recompute_period: recompute_period needs '
     'recompute=full (every n-th layer is wholly recomputed), not op')
case('recompute-period-and-layers', f'{R64},recompute=full,recompute_period=2,recompute_layers=4', 2,
     'error: strategy "tp=8,pp=8,gpus=64,recompute=full,recompute_period=2,recom...": /recompute_period: '
     'recompute_period and recompute_layers contradict each other (give one)')
case('recompute-uniform-without-layers', f'{R64},recompute=full,recompute_method=uniform', 2,
     'error: strategy "tp=8,pp=8,gpus=64,recompute=full,recompute_method=uniform": /recompute_method: '
     'recompute_method=uniform needs recompute_layers (the layers of each checkpointed group)')
case('recompute-policy-unknown', f'{RUN} tp=8,gpus=8,recompute=partial', 2,
     'error: strategy "tp=8,gpus=8,recompute=partial": /recompute: "partial" is not valid; expected one of: none, '
     'selective, full, op, dots')
case('fp8-param-gather-without-fp8', f'{RUN} tp=8,gpus=8,fp8_param_gather=on', 2,
     'error: strategy "tp=8,gpus=8,fp8_param_gather=on": /fp8_param_gather: fp8_param_gather=on needs an FP8 recipe '
     '(fp8=tensorwise, or training.dtype fp8)')
case('remat-to-fit-not-a-switch', f'{RUN} tp=8,gpus=8,remat_to_fit=maybe', 2,
     'error: strategy "tp=8,gpus=8,remat_to_fit=maybe": /remat_to_fit: "maybe" is not valid; expected one of: on, off, true, false')
case('fp8-transpose-cache-without-fp8', f'{RUN} tp=8,gpus=8,fp8_transpose_cache=off', 2,
     'error: strategy "tp=8,gpus=8,fp8_transpose_cache=off": /fp8_transpose_cache: fp8_transpose_cache=off is about the '
     'FP8 weights\' transposes of tensorwise scaling and needs fp8=tensorwise (or training.dtype fp8)')
case('timeline-without-simulation', f'{RUN} tp=8,gpus=8 --analytic --timeline @t.json', 2,
     'error: command line: --timeline: the timeline (and the memory over the step) needs a simulated step; '
     '--analytic skips the simulation (drop one of them)', {'.keep': ''})
case('loss-unknown', f'{RUN} tp=8,gpus=8,loss=chunky', 2,
     'error: strategy "tp=8,gpus=8,loss=chunky": /loss: "chunky" is not valid; expected one of: vocab_parallel, '
     'upcast, fused, fused_inplace, loss_parallel, fused_linear')
case('loss-parallel-without-tp', f'{RUN} gpus=8,loss=loss_parallel', 2,
     'error: strategy "gpus=8,loss=loss_parallel": /loss: loss_parallel is DTensor\'s loss over logits sharded by '
     'tensor parallelism and needs tp > 1; with tp=1 F.cross_entropy on fp32 logits is loss=upcast')
case('sweep-without-inputs', 'sweep --top 3', 2,
     'error: command line: sweep needs --topology and --workload (or: sweep merge FILE...)')
case('sweep-merge-missing-file', 'sweep merge @nope.json', 2,
     'error: @nope.json: cannot open: No such file or directory', {'.keep': ''})
case('sweep-merge-not-a-result', 'sweep merge @r.json', 2,
     'error: @r.json: /counts/enumerated: -1 is out of range; expected an integer in [0, 1125899906842624]\n'
     'error: @r.json: /top/0/strategy: expected a string, got 8\n'
     'error: @r.json: /top_k: expected an integer in [1, 1048576], got "ten"',
     {'r.json': {"topology": "t", "workload": "w", "rank_by": "step_time", "top_k": "ten", "gpus": [8],
                 "counts": {"enumerated": -1, "invalid": 0, "out_of_memory": 0, "candidates": 0},
                 "top": [{"rank": 1, "index": 0, "strategy": 8, "gpus": 8, "step_time_s": 1, "tokens_per_s": 1,
                          "tflops_per_gpu": 1, "mfu": 0.5, "bubble_fraction": 0, "exposed_comm_s": 0,
                          "gpu_hours_per_mtoken": 1, "peak_memory_bytes": 1}],
                 "pruned": []}})
case('sweep-merge-mixed-sweeps', 'sweep merge @a.json @b.json', 2,
     'error: @b.json: /workload: differs from @a.json: the results come from different sweeps',
     {'a.json': {"topology": "t", "workload": "w", "rank_by": "step_time", "top_k": 3, "gpus": [8],
                 "shard": {"index": 0, "count": 2},
                 "counts": {"enumerated": 1, "invalid": 1, "out_of_memory": 0, "candidates": 0},
                 "top": [], "pruned": [{"reason": "r", "count": 1, "example_index": 0, "example": "tp=3"}]},
      'b.json': {"topology": "t", "workload": "other", "rank_by": "step_time", "top_k": 3, "gpus": [8],
                 "shard": {"index": 1, "count": 2},
                 "counts": {"enumerated": 0, "invalid": 0, "out_of_memory": 0, "candidates": 0},
                 "top": [], "pruned": []}})

def shard_result(index, fingerprint, enumerated=1):
    return {"topology": "t", "workload": "w", "rank_by": "step_time", "top_k": 3, "gpus": [8],
            "shard": {"index": index, "count": 2, "fingerprint": fingerprint},
            "counts": {"enumerated": enumerated, "invalid": enumerated, "out_of_memory": 0, "candidates": 0},
            "top": [], "pruned": [{"reason": "r", "count": enumerated, "example_index": index, "example": "tp=3"}]}
# same names, other inputs (another --fix, another file with the same name): the fingerprint tells
case('sweep-merge-other-inputs', 'sweep merge @a.json @b.json', 2,
     'error: @b.json: /shard/fingerprint: differs from @a.json: the results come from different sweeps',
     {'a.json': shard_result(0, "00000000000000aa"), 'b.json': shard_result(1, "00000000000000bb")})
case('sweep-merge-shard-twice-differently', 'sweep merge @a.json @b.json @c.json', 2,
     'error: @c.json: /shard/index: shard 0 of 2 appears twice, with different answers (also @a.json)',
     {'a.json': shard_result(0, "aa"), 'b.json': shard_result(1, "aa"), 'c.json': shard_result(0, "aa", 2)})
case('sweep-merge-missing-shard', 'sweep merge @a.json @a.json', 2,
     'error: sweep merge: shards 1 of 2 are missing', {'a.json': shard_result(0, "aa")})

# Hugging Face configs as workloads
HF_LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
            "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
            "num_key_value_heads": 8, "vocab_size": 128256, "tie_word_embeddings": False, "rope_theta": 500000.0}
case('hf-unknown-model-type', f'run -t {T} -w @config.json -s tp=8,gpus=8 --seq-len 4096 --global-batch 8', 2,
     'error: @config.json: /model_type: "falcon" is not a supported family; supported: llama, mistral, mixtral, '
     'qwen2, qwen2_moe, qwen3, qwen3_moe, deepseek_v2, deepseek_v3, gpt2, gpt_neox',
     {'config.json': {**HF_LLAMA, 'model_type': 'falcon'}})
case('hf-missing-key', f'run -t {T} -w @config.json -s tp=8,gpus=8 --seq-len 4096 --global-batch 8', 2,
     'error: @config.json: /hidden_size: missing; expected an integer in [1, 1048576]',
     {'config.json': {k: v for k, v in HF_LLAMA.items() if k != 'hidden_size'}})
case('hf-contradictory-heads', f'run -t {T} -w @config.json -s tp=8,gpus=8 --seq-len 4096 --global-batch 8', 2,
     'error: @config.json: /num_key_value_heads: 6 does not divide num_attention_heads (32)',
     {'config.json': {**HF_LLAMA, 'num_key_value_heads': 6}})
case('hf-without-training', f'run -t {T} -w @config.json -s tp=8,gpus=8', 2,
     'error: @config.json: a Hugging Face config holds no training settings: give --seq-len and --global-batch '
     '(or a wrapper {"hf_config": "config.json", "training": {...}})',
     {'config.json': HF_LLAMA})
case('hf-wrapper-config-missing', f'run -t {T} -w @w.json -s tp=8,gpus=8', 2,
     'error: @nope.json: cannot open: No such file or directory',
     {'w.json': {"hf_config": "nope.json", "training": {"seq_len": 4096, "global_batch": 8}}})

# Launch configurations: Megatron-LM arguments and TorchTitan TOMLs
case('megatron-contradictory-flags', f'run -t {T} -w {W} --megatron-args @launch.sh', 2,
     'error: --megatron-args @launch.sh: --bf16 and --fp16 contradict each other',
     {'launch.sh': '--tensor-model-parallel-size 8 --bf16 --fp16\n'})
case('megatron-inline-bad-value', f'run -t {T} -w {W} -s megatron:--micro-batch-size=0', 2,
     'error: -s megatron:"--micro-batch-size=0": --micro-batch-size 0: expected an integer in [1, 1073741824]')
case('megatron-ce-impl-without-fusion', f'run -t {T} -w {W} -s megatron:--cross-entropy-fusion-impl=te', 2,
     'error: -s megatron:"--cross-entropy-fusion-impl=te": --cross-entropy-fusion-impl needs --cross-entropy-loss-fusion')
case('megatron-ce-impl-unknown', f'run -t {T} -w {W} --megatron-args @launch.sh', 2,
     'error: --megatron-args @launch.sh: --cross-entropy-fusion-impl linear: expected one of native, te',
     {'launch.sh': '--cross-entropy-loss-fusion --cross-entropy-fusion-impl linear\n'})
# a model given by Megatron's arguments: Megatron's own consistency checks (arguments.py)
MODEL_ARGS = ('--vocab-size 32000 --num-layers 32 --hidden-size 4096 --seq-length 4096 --global-batch-size 1024 '
              '--micro-batch-size 1 --bf16')
for name, extra, message in (
        ('megatron-heads-not-dividing-hidden', '--num-attention-heads 30',
         '--num-attention-heads 30 does not divide --hidden-size 4096 (give --kv-channels for another head size)'),
        ('megatron-query-groups-above-heads', '--num-attention-heads 32 --group-query-attention --num-query-groups 64',
         '--num-query-groups 64 does not divide --num-attention-heads 32'),
        ('megatron-topk-above-experts', '--num-attention-heads 32 --num-experts 8 --moe-router-topk 16',
         '--moe-router-topk 16 exceeds --num-experts 8'),
        ('megatron-dropout-nan', '--num-attention-heads 32 --attention-dropout nan', '--attention-dropout nan: expected a number'),
        ('megatron-dropout-above-one', '--num-attention-heads 32 --hidden-dropout 1.5',
         '--hidden-dropout 1.5: expected a probability in [0, 1)')):
    case(name, 'run -t topologies/dgx-h100-superpod.json --megatron-args @args.txt', 2,
         f'error: --megatron-args @args.txt: {message}',
         {'args.txt': f'{MODEL_ARGS} {extra}\n'})
case('megatron-args-bad-value', f'run -t {T} -w {W} --megatron-args @launch.sh', 2,
     'error: --megatron-args @launch.sh: line 1: $PP is not set: give it a value in the script (or write ${PP:-DEFAULT})',
     {'launch.sh': 'torchrun --nnodes 2 --nproc_per_node 8 pretrain_gpt.py \\\n  --tensor-model-parallel-size 8 \\\n  --pipeline-model-parallel-size $PP\n'})
case('megatron-script-bad-value', f'run -t {T} -w {W} --megatron-args @launch.sh', 2,
     'error: --megatron-args @launch.sh: --pipeline-model-parallel-size two: expected an integer in [1, 1048576]',
     {'launch.sh': 'PP=two\nARGS=(--pipeline-model-parallel-size $PP)\ntorchrun --nnodes=2 --nproc_per_node=8 pretrain_gpt.py "${ARGS[@]}"\n'})
case('megatron-script-loop', f'run -t {T} -w {W} --megatron-args @launch.sh', 2,
     'error: --megatron-args @launch.sh: line 2: `while` is not supported in a launch script (variables, arrays, if [[ ]] and one launch command are)',
     {'launch.sh': '#!/bin/bash\nwhile true; do sleep 1; done\ntorchrun pretrain_gpt.py\n'})
case('megatron-args-without-model', f'run -t {T} --megatron-args @launch.sh', 2,
     'error: --megatron-args @launch.sh: gives no model: give -w WORKLOAD (a workload file or a Hugging Face config), '
     'or the model\'s dimensions',
     {'launch.sh': '--tensor-model-parallel-size 8 --micro-batch-size 1\n'})
case('torchtitan-toml-syntax-error', f'run -t {T} -w {W} --torchtitan @train.toml', 2,
     'error: @train.toml: invalid TOML at line 2: an invalid key appeared (is not a valid key)',
     {'train.toml': '[job]\n[parallelism\ntensor_parallel_degree = 8\n'})
case('torchtitan-toml-bad-degree', f'run -t {T} -w {W} --torchtitan @train.toml', 2,
     'error: @train.toml: /parallelism/tensor_parallel_degree: 0 is out of range; expected an integer in [1, 1048576]',
     {'train.toml': '[parallelism]\ntensor_parallel_degree = 0\n'})
case('torchtitan-optimizer-implementation-unknown', f'run -t {T} -w {W} --torchtitan @train.toml', 2,
     'error: @train.toml: /optimizer/implementation: "fast": expected for-loop, foreach or fused',
     {'train.toml': '[optimizer]\nname = "AdamW"\nimplementation = "fast"\n'})

case('torchtitan-seq-len-conflict',
     'run -t topologies/dgx-h100-superpod.json -w workloads/hf/llama-3.1-8b/config.json --torchtitan @train.toml -s gpus=8 --seq-len 4096', 2,
     'error: @train.toml: /training/seq_len 8192 conflicts with --seq-len 4096 on the command line: give one of them, or the same value',
     {'train.toml': '[training]\nlocal_batch_size = 1\nseq_len = 8192\n'})
case('torchtitan-batch-conflict',
     'run -t topologies/dgx-h100-superpod.json -w workloads/hf/llama-3.1-8b/config.json --torchtitan @train.toml -s gpus=8 --global-batch 64', 2,
     'error: @train.toml: /training/local_batch_size 2 × data-parallel degree 8 = global batch 16 conflicts with --global-batch 64 on the command line: give one of them, or the same value',
     {'train.toml': '[training]\nlocal_batch_size = 2\nseq_len = 8192\n'})
case('torchtitan-compile-component',
     f'run -t {T} -w {W} --torchtitan @train.toml', 2,
     'error: @train.toml: /compile/components: "graph": expected model or loss',
     {'train.toml': '[compile]\nenable = true\ncomponents = ["graph"]\n'})

# goodput: reliability specs and targets
RELIABILITY = {"name": "r", "failures": [{"cause": "GPU", "per": "gpu", "mtbf": "50000 h"}],
               "checkpoint": {"write_bandwidth": "100 GB/s"},
               "restart": {"detection": "1 min", "rescheduling": "1 min", "initialization": "1 min"}}
GP = f'goodput -t {T} -w workloads/megatron2020-8b.json -s tp=8,gpus=8,mb=16'
case('goodput-negative-rate', f'{GP} --days 1 --reliability @r.json', 2,
     'error: @r.json: /failures/0/count: -3 is out of range; expected a value in [0, 1e+09]',
     {'r.json': {**RELIABILITY, "failures": [{"cause": "GPU", "per": "gpu", "count": -3, "over": "10 days", "units": 8}]}})
case('goodput-checkpoint-bandwidth-zero', f'{GP} --days 1 --reliability @r.json', 2,
     'error: @r.json: /checkpoint/write_bandwidth: "0 GB/s" is out of range; expected a value in [1e+06, 1e+15] bytes/s',
     {'r.json': {**RELIABILITY, "checkpoint": {"write_bandwidth": "0 GB/s"}}})
case('goodput-tokens-and-days', f'{GP} --days 1 --tokens 1e9 --reliability @r.json', 2,
     'error: command line: give --tokens N (what to train) or --days D (how long to train), not both',
     {'r.json': RELIABILITY})
case('goodput-tokens-beyond-a-century', f'{GP} --tokens 1e18 --reliability @r.json', 2,
     'error: --tokens: 1e+18 tokens take 1.66e+06 years of failure-free training at 0.8562 s per step of 16384 tokens; '
     'goodput simulates runs of at most 100 years', {'r.json': RELIABILITY})
case('goodput-restart-beyond-mtbf', f'{GP} --days 1 --samples 100 --reliability @r.json', 0,
     'warning: the job makes almost no progress: ETTR 1.8e-214% (closed form), a restart of 3721 s and a checkpoint '
     'interval of 3.425 s against an MTBF of 7.5 s',
     {'r.json': {**RELIABILITY, "failures": [{"cause": "GPU", "per": "gpu", "mtbf": "1 min"}],
                 "restart": {"detection": "1 h", "rescheduling": "1 min", "initialization": "1 min"}}})
case('goodput-restart-unbounded', f'{GP} --days 3650 --reliability @r.json', 2,
     "error: @r.json: the job cannot make progress in bounded time: a restart takes 3721 s and a checkpoint interval "
     "and its save 4.639 s against the job's MTBF of 7.5 s, so 3650 days would take about 1.34e+11 failures and "
     "checkpoints over 1000 samples (at most 1e+09); check the failure rates, or ask for fewer --samples",
     {'r.json': {**RELIABILITY, "failures": [{"cause": "GPU", "per": "gpu", "mtbf": "1 min"}],
                 "restart": {"detection": "1 h", "rescheduling": "1 min", "initialization": "1 min"}}})
case('goodput-unknown-unit', f'{GP} --days 1 --reliability @r.json', 2,
     'error: @r.json: /failures/0/per: "rack" is not valid; expected one of: gpu, node, job',
     {'r.json': {**RELIABILITY, "failures": [{"cause": "GPU", "per": "rack", "mtbf": "5 h"}]}})

# the memory verdict: a plan that does not fit (8.3B parameters unsharded: 16 bytes each of Adam
# state alone, 133 GB of 79.15 GiB) exits 1 from every command that prices it, unless --allow-no-fit
NOFIT = f'-t {T} -w workloads/megatron2020-8b.json -s tp=1,gpus=8,mb=2'
case('goodput-does-not-fit', f'goodput {NOFIT} --days 1', 1,
     "DOES NOT FIT: peak 159.30 GiB per GPU exceeds the device's 79.15 GiB; goodput prices only plans that fit (--allow-no-fit prices it anyway)")
case('goodput-allow-no-fit', f'goodput {NOFIT} --days 1 --allow-no-fit', 0,
     "DOES NOT FIT: peak 159.30 GiB per GPU exceeds the device's 79.15 GiB (priced anyway: --allow-no-fit)")
case('perturb-does-not-fit', f'run {NOFIT} --perturb @p.json', 1,
     "does not fit: peak 159.30 GiB per GPU exceeds the device's 79.15 GiB",
     {'p.json': {"slow_gpus": [{"rank": 3, "compute_factor": 1.2}]}})
case('run-allow-no-fit', f'run {NOFIT} --perturb @p.json --allow-no-fit', 0,
     "DOES NOT FIT: peak 159.30 GiB per GPU exceeds the device's 79.15 GiB (priced anyway: --allow-no-fit)",
     {'p.json': {"slow_gpus": [{"rank": 3, "compute_factor": 1.2}]}})

# run --perturb: stragglers
PR = f'run -t {T} -w workloads/megatron2021-7.5b.json -s tp=4,pp=2,gpus=32 --perturb @p.json'
case('perturb-slowdown-below-one', PR, 2,
     'error: @p.json: /slow_gpus/0/compute_factor: 0.5 is out of range; expected a value in [1, 100]',
     {'p.json': {"slow_gpus": [{"rank": 1, "compute_factor": 0.5}]}})
case('perturb-absurd-slowdown', PR, 2,
     'error: @p.json: /slow_gpus/0/compute_factor: 1000 is out of range; expected a value in [1, 100]',
     {'p.json': {"slow_gpus": [{"rank": 1, "compute_factor": 1000}]}})
case('perturb-rank-outside-job', PR, 2,
     'error: --perturb: /slow_gpus: rank 64 is outside the job\'s 32 ranks (0 to 31)',
     {'p.json': {"slow_gpus": [{"rank": 64, "compute_factor": 1.5}]}})
case('perturb-nic-bandwidth-zero', PR, 2,
     'error: @p.json: /degraded_links/0/bandwidth_fraction: 0 is out of range; expected a value in [0.001, 1]',
     {'p.json': {"degraded_links": [{"nic_of_rank": 3, "bandwidth_fraction": 0}]}})
case('perturb-nic-outside-job', PR, 2,
     'error: --perturb: /degraded_links: rank 40 is outside the job\'s 32 ranks (0 to 31)',
     {'p.json': {"degraded_links": [{"nic_of_rank": 40, "bandwidth_fraction": 0.5}]}})
case('perturb-nic-rank-and-count', PR, 2,
     'error: @p.json: /degraded_links/0: give nic_of_rank (one NIC) or count (drawn from seed), not both',
     {'p.json': {"degraded_links": [{"nic_of_rank": 1, "count": 2, "bandwidth_fraction": 0.5}]}})
case('perturb-nic-on-torus',
     'run -t topologies/tpu-v4-pod.json -w workloads/megatron2021-7.5b.json -s tp=4,gpus=16 --perturb @p.json', 2,
     'error: --perturb: /degraded_links: rank 2 has no NIC in topology tpu-v4-pod (a torus or a single node): no '
     'network link to degrade',
     {'p.json': {"degraded_links": [{"nic_of_rank": 2, "bandwidth_fraction": 0.5}]}})

# Profiler traces (trace summary, replay, calibrate)
import gzip
SMALL_TRACE = {"traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
    {"ph": "X", "cat": "kernel", "name": "k" * 4000, "pid": 0, "tid": 7, "ts": 10, "dur": 50,
     "args": {"stream": 7, "correlation": 1}}]}
_packed = gzip.compress(json.dumps(SMALL_TRACE).encode(), mtime=0)
case('trace-truncated-gzip', 'trace summary @t.json.gz', 2,
     'error: @t.json.gz: corrupt or truncated gzip stream (unexpected end of file) after 4240 decompressed bytes',
     {'t.json.gz': _packed[:len(_packed) - 12]})
case('trace-not-kineto', 'trace summary @t.json', 2,
     'error: @t.json: /traceEvents: missing; expected the profiler\'s list of trace events',
     {'t.json': {"schemaVersion": 1, "name": "not a trace"}})
case('trace-events-not-a-list', 'trace summary @t.json', 2,
     'error: @t.json: /traceEvents: expected a list of trace events',
     {'t.json': {"traceEvents": {"ph": "X"}}})
case('trace-top-level-array', 'replay --trace @t.json', 2,
     'error: @t.json: expected a JSON object with traceEvents, got a list',
     {'t.json': [SMALL_TRACE]})
case('trace-cut-mid-event', 'trace summary @t.json', 2,
     "error: @t.json: invalid JSON near byte 37: syntax error while parsing value - unexpected end of input; expected '[', '{', or a literal",
     {'t.json': '{"traceEvents": [{"ph": "X", "dur": '})
case('trace-missing-file', 'trace summary @nope.json.gz', 2,
     'error: @nope.json.gz: cannot open: No such file or directory', {'.keep': ''})
case('replay-zero-compute-scale', 'replay --trace @t.json --compute-scale 0', 2,
     'error: --compute-scale: 0 is not a factor in [0.01, 1e6]', {'t.json': SMALL_TRACE})
case('replay-calibration-not-calibration', 'replay --trace @t.json --calibration @c.json', 2,
     'error: @c.json: /traceEvents: unknown key "traceEvents"; valid keys: collectives, fit, host, kernels, memory, sources, traces', {'t.json': SMALL_TRACE, 'c.json': SMALL_TRACE})
# replay -t must cost something: NCCL kernels without sizes (PyTorch before 2.1) or none at all
def nccl_kernel(ts, correlation, sized):
    args = {"stream": 20, "correlation": correlation}
    if sized:
        args.update({"In msg nelems": 1 << 20, "Out msg nelems": 1 << 20, "Group size": 2, "dtype": "Float"})
    return {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
            "pid": 0, "tid": 20, "ts": ts, "dur": 30, "args": args}
UNSIZED_TRACE = {"traceEvents": SMALL_TRACE["traceEvents"] + [nccl_kernel(20, 2, False)]}
PARTLY_SIZED_TRACE = {"traceEvents": SMALL_TRACE["traceEvents"] + [nccl_kernel(20, 2, False), nccl_kernel(60, 3, True)]}
case('calibrate-output-is-directory', 'calibrate --trace @t.json -o @', 2,
     'error: @: cannot write', {'t.json': PARTLY_SIZED_TRACE})
case('calibrate-nothing-to-fit', 'calibrate --trace @t.json -o @cal.json', 2,
     'error: @t.json: nothing to fit: no NCCL kernels with sizes (the profiler\'s "In msg nelems" and "Group size"), '
     'and no topology to fit GEMMs against (-t)', {'t.json': UNSIZED_TRACE})
case('replay-no-profiler-steps', 'replay --trace @t.json', 2,
     'error: @t.json: nothing to replay: no profiler steps (ProfilerStep#N annotations)',
     {'t.json': {"traceEvents": [e for e in SMALL_TRACE["traceEvents"] if e["cat"] != "user_annotation"]}})
case('replay-no-gpu-kernels', 'replay --trace @t.json', 2,
     'error: @t.json: nothing to replay: no GPU kernels, copies or sets',
     {'t.json': {"traceEvents": [e for e in SMALL_TRACE["traceEvents"] if e["cat"] != "kernel"]}})
# calibrate --microbenchmarks: rows a device could not have measured, or of the wrong shape
def bench_row(**fields):
    row = {"kind": "gemm", "gpu": "H100", "dtype": "BF16", "m": 8192, "n": 8192, "k": 8192, "tflops": 700}
    row.update(fields)
    return row
BENCH_CMD = 'calibrate --microbenchmarks @b.json --match H100 -t topologies/dgx-h100-superpod.json -o @cal.json'
case('microbench-gemm-above-peak', BENCH_CMD, 2,
     "error: @b.json: /rows/0/tflops: 5e+04 TFLOP/s is above H100-SXM5-80GB's dense bf16 peak of 989: a measurement "
     "of another device, or in another unit?", {'b.json': {"rows": [bench_row(tflops=50000)]}})
case('microbench-negative-rate', BENCH_CMD, 2,
     "error: @b.json: /rows/0/tflops: -3 is out of range; expected a positive value of at most 1e+30",
     {'b.json': {"rows": [bench_row(tflops=-3)]}})
case('microbench-triad-above-hbm', BENCH_CMD, 2,
     "error: @b.json: /rows/1/tb_per_s: 300 TB/s is above H100-SXM5-80GB's HBM bandwidth of 3.35 TB/s: a "
     "measurement of another device, or in another unit?",
     {'b.json': {"rows": [bench_row(), {"kind": "hbm_stream", "gpu": "H100", "op": "Triad", "tb_per_s": 300}]}})
ALL_REDUCE = {"kind": "nccl_all_reduce", "gpu": "H100", "nodes": 1, "gpus": 8, "algo": "ring",
              "message_bytes_derived": 1 << 30, "busbw_gb_s": 400}
case('microbench-all-reduce-group-of-zero', BENCH_CMD, 2,
     "error: @b.json: /rows/0/gpus: 0 is out of range; expected an integer in [2, 576]",
     {'b.json': {"rows": [dict(ALL_REDUCE, gpus=0)]}})
case('microbench-all-reduce-more-gpus-than-node', BENCH_CMD, 2,
     "error: @b.json: /rows/0/gpus: 16 GPUs on one node; dgx-h100-superpod's nodes have 8",
     {'b.json': {"rows": [dict(ALL_REDUCE, gpus=16)]}})
case('microbench-all-reduce-above-fabric', BENCH_CMD, 2,
     "error: @b.json: /rows/0/busbw_gb_s: 9e+04 GB/s is above what dgx-h100-superpod's fabric carries (900 GB/s per "
     "device, twice the link rate with in-switch reduction): a measurement of another device, or in another unit?",
     {'b.json': {"rows": [dict(ALL_REDUCE, busbw_gb_s=90000)]}})
case('microbench-wrong-types', BENCH_CMD, 2,
     'error: @b.json: /rows/0/m: expected an integer in [1, 16777216], got "8192"\n'
     'error: @b.json: /rows/1/causal: expected true or false, got "maybe"\n'
     'error: @b.json: /rows/1/pass: "both" is not valid; expected one of: forward, forward+backward\n'
     'error: @b.json: /rows/2/dtype: "TF32" does not start with FP8, FP16 or BF16',
     {'b.json': {"rows": [bench_row(m="8192"),
                          {"kind": "attention", "gpu": "H100", "impl": "FlashAttention-2", "pass": "both",
                           "causal": "maybe", "head_dim": 128, "seq_len": 4096, "tflops": 300},
                          bench_row(dtype="TF32")]}})
case('microbench-no-row-of-the-device', 'calibrate --microbenchmarks @b.json --match B200 '
     '-t topologies/dgx-h100-superpod.json -o @cal.json', 2,
     'error: @b.json: /rows: no row to fit has a "gpu" containing "B200" (--match); the file\'s devices: A100; H100',
     {'b.json': {"rows": [bench_row(), bench_row(gpu="A100")]}})
# Chakra execution traces (replay --chakra, run --chakra): length-delimited protobuf, written here
# byte by byte: a varint length, then the message (GlobalMetadata: version "0.0.4")
CHAKRA_META = bytes([7, 0x0a, 5]) + b'0.0.4'
case('replay-trace-and-chakra', 'replay --trace @t.json --chakra @et', 2,
     'error: command line: give --trace (Kineto) or --chakra (Chakra), not both')
case('replay-nothing', 'replay', 2, 'error: command line: replay needs --trace FILE (Kineto) or --chakra DIR')
case('replay-chakra-not-a-folder', 'replay --chakra @missing', 2,
     'error: @missing: not a folder of Chakra traces')
case('replay-chakra-no-traces', 'replay --chakra @et', 2,
     'error: @et: no Chakra traces (<prefix>.<rank>.et) in the folder', {'et/README': 'no traces here\n'})
case('replay-chakra-truncated', 'replay --chakra @et', 2,
     'error: @et/x.0.et: corrupt or truncated protobuf after 0 nodes',
     {'et/x.0.et': CHAKRA_META + bytes([16, 0x08, 0x05, 0x12])})
# a Node with id 5 and type 42 (field 1 varint, field 3 varint)
case('replay-chakra-unknown-node-type', 'replay --chakra @et', 2,
     'error: @et/x.0.et: node 5 (""): unknown node type 42',
     {'et/x.0.et': CHAKRA_META + bytes([4, 0x08, 0x05, 0x18, 42])})
case('replay-chakra-html', 'replay --chakra @et --html @p.html', 2,
     'error: --html: a Chakra replay has no HTML page yet (use --format json)',
     {'et/x.0.et': CHAKRA_META + bytes([4, 0x08, 0x05, 0x18, 4])})
case('replay-cost-compute-without-chakra', 'replay --trace @t.json --cost-compute', 2,
     'error: --cost-compute: costs the kernels of Chakra traces: give --chakra DIR')
case('replay-cost-compute-without-topology', 'replay --chakra @et --cost-compute', 2,
     'error: --cost-compute: costing the kernels needs a device: give -t TOPOLOGY',
     {'et/x.0.et': CHAKRA_META + bytes([4, 0x08, 0x05, 0x18, 4])})
case('chakra-without-simulation', f'{RUN} tp=8,gpus=8 --analytic --chakra @et', 2,
     'error: command line: --chakra: a Chakra export is the simulated step\'s task graph; --analytic skips the '
     'simulation (drop one of them)')
case('replay-topology-costs-nothing', f'replay --trace @t.json -t {T}', 2,
     'error: -t: none of the 1 NCCL kernel(s) can be costed: 1 record no size or group size (the profiler\'s "In msg nelems" and "Group size" arguments)',
     {'t.json': UNSIZED_TRACE})
case('replay-topology-no-nccl', f'replay --trace @t.json -t {T}', 2,
     'error: -t: the traces hold no NCCL kernels: there is nothing to cost', {'t.json': SMALL_TRACE})
case('replay-topology-partly-costed', f'replay --trace @t.json -t {T}', 0,
     'warning: 1 of 2 NCCL kernel(s) keep their recorded time: 1 record no size or group size (the profiler\'s "In msg nelems" and "Group size" arguments)',
     {'t.json': PARTLY_SIZED_TRACE})

# Robustness: bytes that are not UTF-8, counts beyond what a simulation takes, times beyond a
# session, fields of the wrong type in a trace, calibration fits that cannot be.
case('strategy-invalid-utf8', f'run -t {T} -w workloads/megatron2020-1b.json -s tp=8BYTEFF,pp=2', 2,
     'error: strategy "tp=8BYTEFF,pp=2": /tp: expected an integer in [1, 1048576], got "8\ufffd"')
# a raw 0xFF byte (not UTF-8) in the argument, echoed as given in the error's source
for _name in ('args', 'stderr'):
    _path = f'{cases_dir}/strategy-invalid-utf8/{_name}'
    _data = open(_path, 'rb').read().replace(b'BYTEFF', bytes([0xff]))
    open(_path, 'wb').write(_data)
case('workload-too-many-microbatches', f'run -t {T} -w @w.json -s tp=1,gpus=8,mb=1', 2,
     'error: @w.json: /training/global_batch: 125000000 micro-batches per pipeline per step (global_batch / (dp·mb)) '
     'of 96 layers are more than a simulation takes (2097152 layer passes, about a GiB); raise mb or dp, or use '
     '--analytic',
     {'w.json': work(training__global_batch=1000000000, name='big-batch')})
case('trace-span-of-years', 'trace summary @t.json', 2,
     'error: @t.json: /traceEvents: events span 11574.1 days; one profiling session spans at most a day (a corrupt timestamp?)',
     {'t.json': {"traceEvents": [
         {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.7e15, "dur": 5, "args": {"stream": 7}},
         {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 7e14, "dur": 5, "args": {"stream": 7}}]}})
case('trace-wrong-types-everywhere', 'trace summary @t.json --format json', 0, '',
     {'t.json': {"distributedInfo": {"rank": "zero", "world_size": [2], "backend": 7},
                 "deviceProperties": [{"name": 5, "totalGlobalMem": "lots"}],
                 "traceEvents": [
                     {"ph": 1, "cat": 2, "name": 3, "ts": "now", "dur": {}},
                     {"ph": "X", "cat": ["kernel"], "name": None, "ts": 1, "dur": 1},
                     {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float", "ts": 1, "dur": 1,
                      "tid": "seven", "args": {"stream": "x", "correlation": [], "In msg nelems": "many",
                                               "Group size": -4, "dtype": 9, "Process Group Ranks": "[99999999999999]"}},
                     {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#x", "ts": 0, "dur": 1e9},
                     None, [], "event", 12]}})
case('calibration-empty-fit-range', f'collective -t {T} --op all_reduce --bytes 1GB --calibration @c.json', 2,
     'error: @c.json: /collectives/fits/0/max_bytes: 5 is below min_bytes (10): the fitted range is empty',
     {'c.json': {"collectives": {"fits": [{"op": "all_reduce", "group_size": 2, "latency": 1e-5,
                                           "bandwidth": 1e10, "min_bytes": 10, "max_bytes": 5}]}}})

# TPU slices and the data-centre network (issue 28), from the shipped v6e topologies
V6E = json.load(open(f'{root}/topologies/tpu-v6e-pod.json'))
V6E_MULTI = json.load(open(f'{root}/topologies/tpu-v6e-multislice.json'))
L8 = 'workloads/llama3-8b.json'
def torus(base, **network):
    t = json.loads(json.dumps(base))
    for k, v in network.items():
        if v is DELETE: del t['network'][k]
        else: t['network'][k] = v
    return t
case('dcn-hosts-not-dividing-slice', f'run -t @t.json -w {L8} -s tp=1', 2,
     'error: @t.json: /network/dcn/chips_per_host: hosts of 8 chips do not divide a slice of 36 chips',
     {'t.json': torus(V6E_MULTI, dims=[6, 6], wraparound=DELETE,
                      dcn={'link': 'dcn-200', 'chips_per_host': 8, 'nics_per_host': 2})})
case('slice-shape-pod-cannot-form', f'run -t @t.json -w {L8} -s tp=1', 2,
     'error: @t.json: /network/dims: on ici-v6e, a pod forms slices of at most 16x16: 32x8 cannot be formed',
     {'t.json': torus(V6E, dims=[32, 8], wraparound=DELETE)})
case('slices-without-dcn', f'run -t @t.json -w {L8} -s tp=1', 2,
     'error: @t.json: /network/dcn: missing; 4 slices are joined by the data-centre network: give its NICs, such as '
     '{"link": "dcn-200", "chips_per_host": 8, "nics_per_host": 4}',
     {'t.json': torus(V6E_MULTI, dcn=DELETE, wraparound=True)})
case('wraparound-not-on-full-axis', f'run -t @t.json -w {L8} -s tp=1', 2,
     'error: @t.json: /network/wraparound: on ici-v6e, a 8x16 slice has no wraparound links along dimension 0 '
     '(8 chips): only a full axis of 16 wraps',
     {'t.json': torus(V6E, dims=[8, 16], wraparound=True)})

# activation offloading (Megatron-Core's CPU offloading)
H100T = 'topologies/dgx-h100-superpod.json'
case('megatron-offload-layers-without-offloading',
     f'run -t {H100T} -w {L8} -s megatron:--cpu-offloading-num-layers=4', 2,
     'error: -s megatron:"--cpu-offloading-num-layers=4": --cpu-offloading-num-layers needs --cpu-offloading')
case('offload-every-layer', f'run -t {H100T} -w {L8} -s gpus=8,offload_layers=32', 2,
     'error: strategy "gpus=8,offload_layers=32": /offload_layers: 32 is not fewer than the model\'s 32 layers '
     '(at most 31)')
case('offload-with-pipeline', f'run -t {H100T} -w {L8} -s pp=2,gpus=16,offload_layers=4,recompute=full', 2,
     'error: strategy "pp=2,gpus=16,offload_layers=4,recompute=full": /offload_layers: offload_layers needs pp=1 '
     '(Megatron-Core refuses CPU offloading with pipeline parallelism)\n'
     'error: strategy "pp=2,gpus=16,offload_layers=4,recompute=full": /offload_layers: offload_layers needs '
     'recompute=none, not full (Megatron-Core refuses CPU offloading with activation recomputation)')
case('offload-without-host-link', f'run -t topologies/gb200-nvl72.json -w {L8} -s gpus=8,offload_layers=4', 2,
     'error: strategy "gpus=8,offload_layers=4": /offload_layers: device "GB200-B200-186GB" states no host link to '
     'copy to (give the topology\'s device host_link, a catalogue link such as "pcie5", or host_bandwidth)')

# combined 1F1B where Megatron-Core refuses it
case('moe-comm-overlap-with-full-recompute',
     f'run -t {H100T} -w workloads/qwen3-30b-a3b.json -s ep=8,gpus=8,overlap_moe_comm=on,recompute=full', 2,
     'error: strategy "ep=8,gpus=8,overlap_moe_comm=on,recompute=full": /overlap_moe_comm: overlap_moe_comm needs '
     'recompute other than full and no recompute_layers (Megatron-Core refuses whole-layer recomputation with it)')

# the DeepEP dispatcher and group-limited routing (docs/model.md "Mixture of experts")
case('dispatcher-unknown', f'run -t {H100T} -w workloads/qwen3-30b-a3b.json -s ep=8,gpus=8,dispatcher=nccl', 2,
     'error: strategy "ep=8,gpus=8,dispatcher=nccl": /dispatcher: "nccl" is not valid; expected one of: alltoall, deepep')
case('dispatcher-deepep-without-experts', f'{RUN} tp=8,gpus=8,dispatcher=deepep', 2,
     'error: strategy "tp=8,gpus=8,dispatcher=deepep": /dispatcher: dispatcher=deepep needs a mixture of experts '
     'with ep > 1 (it carries the expert-parallel exchange)')
MOE_W = {"name": "m", "model": {"kind": "transformer", "layers": 4, "hidden": 1024, "heads": 16, "ffn_hidden": 4096,
                                "vocab": 32000, "mlp": "swiglu",
                                "moe": {"experts": 16, "top_k": 4, "expert_ffn_hidden": 512}},
         "training": {"seq_len": 1024, "global_batch": 8, "dtype": "bf16", "optimizer": "adamw"}}
for name, extra, message in (
        ('moe-groups-uneven', {"groups": 3}, '/model/moe/groups: 3 does not divide the 16 experts into equal groups'),
        ('moe-group-top-k-above-groups', {"groups": 4, "group_top_k": 5}, '/model/moe/group_top_k: 5 exceeds the '
         'number of groups (4)'),
        ('moe-group-top-k-too-few-experts', {"groups": 8, "group_top_k": 1}, '/model/moe/group_top_k: 1 group(s) of '
         '2 experts cannot hold the top_k of 4'),
        ('moe-balancing-unknown', {"balancing": "sinkhorn"}, '/model/moe/balancing: "sinkhorn" is not valid; '
         'expected one of: aux_loss, global_aux_loss, aux_free, forced'),
        ('moe-load-imbalance-below-one', {"load_imbalance": 0.8}, '/model/moe/load_imbalance: 0.8 is out of range; '
         'expected a value in [1, 4]'),
        ('moe-load-imbalance-above-all-tokens', {"load_imbalance": 5}, '/model/moe/load_imbalance: 5 is out of '
         'range; expected a value in [1, 4]'),
        ('moe-balancing-with-capacity', {"capacity_factor": 1.25, "balancing": "aux_free"},
         '/model/moe/balancing: applies to dropless routing only; with capacity_factor every expert takes its '
         'capacity'),
        ('moe-load-seed-forced', {"balancing": "forced", "load_seed": 3},
         '/model/moe/load_seed: draws nothing: the experts\' loads are even'),
        ('moe-load-imbalance-with-capacity', {"capacity_factor": 1.25, "load_imbalance": 1.5},
         '/model/moe/load_imbalance: applies to dropless routing only; with capacity_factor every expert takes '
         'its capacity'),
        ('moe-load-imbalance-forced', {"balancing": "forced", "load_imbalance": 1.5},
         '/model/moe/load_imbalance: 1.5 contradicts balancing "forced" (1)')):
    w = json.loads(json.dumps(MOE_W))
    w["model"]["moe"].update(extra)
    case(name, f'run -t {H100T} -w @w.json -s ep=8,gpus=8', 2, f'error: @w.json: {message}', {'w.json': w})

# multi-token prediction modules (docs/model.md "Multi-token prediction")
for name, value, message in (('mtp-layers-negative', -1, '-1 is out of range; expected an integer in [0, 64]'),
                             ('mtp-layers-fractional', 1.5, 'expected an integer in [0, 64], got 1.5')):
    w = json.loads(json.dumps(MOE_W))
    w["model"]["mtp_layers"] = value
    case(name, f'run -t {H100T} -w @w.json -s ep=8,gpus=8', 2, f'error: @w.json: /model/mtp_layers: {message}',
         {'w.json': w})

#!/usr/bin/env python3
"""The JSON Schemas of the preflight report and the merged fleet report (docs/schemas/,
issue #23 item 5), validated against real output: a preflight run on this machine's cpu
backend (with and without --concurrency / --max-model-len), the fleet fixtures, and a merge
of both. Then the control: the same documents with a required key removed, a key of the
wrong type and a key the schema does not know are refused, so a schema that accepted
anything would fail here.

Usage: test_json_schemas.py KVSIGHT_BINARY. Exit 0 pass, 1 a check failed, 77 jsonschema
missing outside CI (skip; under CI=1 a missing package is a failure).
"""
import copy
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
try:
    import jsonschema
except ImportError:
    msg = "python3-jsonschema is not installed (scripts/setup.sh installs it)"
    if os.environ.get("CI"):
        print("FAIL: " + msg)
        sys.exit(1)
    print("SKIP: " + msg)
    sys.exit(SKIP)

binary = sys.argv[1]
failures = []
checked = 0


def validator(name):
    with open(os.path.join(ROOT, "docs", "schemas", name)) as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def expect_valid(v, document, what):
    global checked
    checked += 1
    errors = sorted(v.iter_errors(document), key=lambda e: list(e.path))
    for e in errors[:5]:
        failures.append(f"{what}: {e.json_path}: {e.message[:200]}")


def expect_invalid(v, document, what):
    global checked
    checked += 1
    if v.is_valid(document):
        failures.append(f"{what}: accepted, but the schema must refuse it")


def run(args):
    done = subprocess.run([binary] + args, capture_output=True, text=True, timeout=600)
    if done.returncode not in (0, 1):
        failures.append(f"kvsight {' '.join(args)}: exit {done.returncode}: {done.stderr.strip()[:300]}")
        return None
    return json.loads(done.stdout)


preflight = validator("kvsight.preflight-1.schema.json")
merge = validator("kvsight.merge-1.schema.json")

work = tempfile.mkdtemp(prefix="kvsight-schemas-")
try:
    reports = []
    for name, extra in (("plain", []),
                        ("requested", ["--model", "qwen3.6-27b", "--gpu", "rx7900xt", "--tp", "2",
                                       "--concurrency", "4", "--max-model-len", "8192"])):
        report = run(["preflight", "--quick", "--backend", "cpu", "--quiet", "--format", "json"] + extra)
        if report is None:
            continue
        expect_valid(preflight, report, f"preflight ({name})")
        report["host"] = "node-" + name  # one file per node for the merge below
        reports.append(report)
        with open(os.path.join(work, report["host"] + ".json"), "w") as f:
            json.dump(report, f)
    # A launch line after -- (issue #22): its section is part of the report.
    report = run(["preflight", "--quick", "--backend", "cpu", "--quiet", "--format", "json", "--model",
                  "llama-3.1-8b", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len",
                  "8k", "--port", "8000"])
    if report is not None:
        expect_valid(preflight, report, "preflight (launch line)")
        launch = report.get("launch", {})
        if [u.get("flag") for u in launch.get("applied", [])] != ["--max-model-len"] or \
                [u.get("flag") for u in launch.get("ignored", [])] != ["--port"]:
            failures.append(f"preflight (launch line): launch section {launch}")
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "fixtures", "reports", "fleet", "*.json"))):
        with open(path) as f:
            expect_valid(preflight, json.load(f), os.path.relpath(path, ROOT))
    for directory in (work, os.path.join(ROOT, "tests", "fixtures", "reports", "fleet")):
        merged = run(["report", "merge", directory, "--format", "json"])
        if merged is not None:
            expect_valid(merge, merged, f"report merge {os.path.relpath(directory, ROOT)}")

    # The controls: each change alone must be refused.
    if reports:
        base = reports[0]
        for what, change in (
                ("no verdict", lambda d: d.pop("verdict")),
                ("verdict OK", lambda d: d.update(verdict="OK")),
                ("exit_code as text", lambda d: d.update(exit_code="0")),
                ("a device without memory_free_bytes", lambda d: d["devices"][0].pop("memory_free_bytes")),
                ("negative bandwidth", lambda d: d["bandwidth"].update(measured_bytes_per_s=-1.0)),
                ("an unknown top-level key", lambda d: d.update(surprise=1)),
                ("schema kvsight.preflight/2", lambda d: d.update(schema="kvsight.preflight/2"))):
            document = copy.deepcopy(base)
            change(document)
            expect_invalid(preflight, document, f"preflight with {what}")
        merged = run(["report", "merge", work, "--format", "json"])
        if merged is not None:
            for what, change in (("no nodes", lambda d: d.update(nodes=[])),
                                 ("a node without host", lambda d: d["nodes"][0].pop("host")),
                                 ("no schema", lambda d: d.pop("schema"))):
                document = copy.deepcopy(merged)
                change(document)
                expect_invalid(merge, document, f"merge with {what}")
finally:
    shutil.rmtree(work, ignore_errors=True)

for f in failures:
    print("FAIL: " + f)
print(f"{checked - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)

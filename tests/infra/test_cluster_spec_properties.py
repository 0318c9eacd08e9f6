"""Property tests for trainer/contract/cluster_spec.py as the stack uses it: unique hosts, DNS-1123
names, and every task's TF_CONFIG accepted by TensorFlow's own TFConfigClusterResolver.

Imports TensorFlow (about 5 s), hence a module of its own.
"""

from __future__ import annotations

import json
import os
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from trainer.contract import cluster_spec as cs

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402

TFConfigClusterResolver = tf.distribute.cluster_resolver.TFConfigClusterResolver

DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

prefixes = st.from_regex(r"[a-z]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)
namespaces = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?", fullmatch=True)
ports = st.integers(min_value=1, max_value=65535)


@st.composite
def topologies(draw):
    replicas = cs.Replicas(chief=1, worker=draw(st.integers(1, 40)), ps=draw(st.integers(0, 8)))
    worker_port = draw(ports)
    ps_port = draw(ports.filter(lambda p: p != worker_port))
    return (
        draw(prefixes),
        draw(namespaces),
        replicas,
        {"chief": worker_port, "worker": worker_port, "ps": ps_port},
    )


@given(topologies())
@settings(max_examples=150)
def test_hosts_are_unique_and_names_are_dns_1123_labels(topology):
    prefix, namespace, replicas, port_map = topology
    spec = cs.kubernetes_cluster_spec(prefix, namespace, replicas, port_map)
    hosts = [h for hs in spec.values() for h in hs]
    assert len(hosts) == len(set(hosts)) == 1 + replicas.worker + replicas.ps
    for task_type, addresses in spec.items():
        for index, address in enumerate(addresses):
            match = re.fullmatch(r"([^.]+)\.([^.]+)\.svc:([0-9]+)", address)
            assert match, address
            name, ns, svc_port = match.groups()
            assert name == cs.task_name(prefix, task_type, index)
            assert DNS_1123_LABEL.match(name) and len(name) <= 63, name
            assert ns == namespace and svc_port == str(port_map[task_type])


@given(topologies())
@settings(max_examples=25)
def test_every_task_tf_config_is_accepted_by_tensorflow(topology):
    prefix, namespace, replicas, port_map = topology
    spec = cs.kubernetes_cluster_spec(prefix, namespace, replicas, port_map)
    saved = os.environ.get("TF_CONFIG")
    try:
        for task_type, index in replicas.tasks():
            os.environ["TF_CONFIG"] = cs.tf_config_json(spec, task_type, index)
            resolver = TFConfigClusterResolver()
            assert resolver.task_type == task_type
            assert resolver.task_id == index
            assert resolver.cluster_spec().as_dict() == spec
            assert resolver.cluster_spec().task_address(task_type, index) == spec[task_type][index]
            assert json.loads(os.environ["TF_CONFIG"])["task"] == {"type": task_type, "index": index}
    finally:
        if saved is None:
            os.environ.pop("TF_CONFIG", None)
        else:
            os.environ["TF_CONFIG"] = saved

"""The grammars of configuration values: each parser takes one raw value (a flat string or a
``--path`` JSON value) and returns it typed, or raises ValueError whose text is the rule the
message quotes. parsers.py: numbers, names, paths, URLs, images, CIDRs and lists; labels.py:
labels, node selectors and tolerations; alicloud.py: ACK's versions, instance types, vSwitch
ids, NVIDIA drivers and credential lifetimes; gpu_families.py: what the stack knows of the GPU
instance families, and the GPU pool's defaults and bounds chosen from them. The schema
(infra/settings) names one parser per key."""

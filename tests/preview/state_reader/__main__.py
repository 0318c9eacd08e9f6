"""Reads this stack's state through infra/stack_state.py after each of READS registrations.

Each registration makes the engine rewrite the stack's checkpoint, so reads meet writes (the
race infra/stack_state.py reads again after). Exports how many reads succeeded and the number
of resources each saw.
"""

import pulumi

from infra.stack_state import read_stack_resources

READS = 200

seen = []
for step in range(READS):
    pulumi.ComponentResource("tfmnist:test:Step", f"step-{step}")
    seen.append(len(read_stack_resources()))
pulumi.export("reads", len(seen))
pulumi.export("seen", seen)

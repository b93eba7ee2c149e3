"""The observation convention every masked env here follows.

An env whose agents have invalid choices returns ``Dict({OBS_KEY: Box, MASK_KEY: Box(0, 1)})``
with a ``MultiDiscrete`` action: the mask concatenates one 0/1 vector per action component, and
each component has at least one valid entry. Envs without invalid choices return a flat ``Box``.
Methods that need every agent at every env step refuse other envs with one error type.
"""

OBS_KEY = "observations"
MASK_KEY = "action_mask"


class NotSimultaneousError(ValueError):
    """The env lets agents skip steps, where a method needs every agent at every env step (a joint
    state, joint credit or a joint action per step is undefined there)."""

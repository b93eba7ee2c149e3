"""The observation convention every masked env here follows.

An env whose agents have invalid choices returns ``Dict({OBS_KEY: Box, MASK_KEY: Box(0, 1)})``
with a ``MultiDiscrete`` action: the mask concatenates one 0/1 vector per action component, and
each component has at least one valid entry. Envs without invalid choices return a flat ``Box``.
"""

OBS_KEY = "observations"
MASK_KEY = "action_mask"

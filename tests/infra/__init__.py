import os

# jsii prints a Node.js end-of-life banner on every process start otherwise.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

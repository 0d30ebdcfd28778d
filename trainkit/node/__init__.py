"""Files that run ON the nodes outside the training package: stdlib only, copied into each run
folder at launch, so they work whatever trainkit version (if any) the node's Python has."""

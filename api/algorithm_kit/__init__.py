"""Tools for a data scientist's own algorithm, written outside this repository against ``consortia_sdk``
(docs/sdk.md "Write, check, simulate"):

* :mod:`.scaffold` -- ``consortia algorithm new``: a working algorithm folder from a template (scikit-learn
  or PyTorch) in the agreed layout (image.json, module, pinned requirements, README, test);
* :mod:`.folder` -- an algorithm folder's declaration and class, loaded the way its image loads it;
* :mod:`.contract` -- ``consortia algorithm check``: the contract checks (identical bytes, parameters,
  payloads, neighbours, declared inputs) and the sources of nondeterminism caught while the algorithm runs
  (:mod:`.instrument`);
* :mod:`.local_run` -- ``consortia simulate``: the in-memory simulator on local CSV/Parquet files.
"""

"""Algorithm images: build locally, identify by digest, distribute by digest, verify before every run
(docs/executor.md "Images and digests", "Image distribution").

The image owner builds an image from one folder of ``algorithm-images/`` (:mod:`.recipe`), in three
cached layers through the container engine (:mod:`.engine`): ``consortia-base:<h>`` (debootstrap),
``consortia-python:<h>`` (the project's pinned wheels, installed offline), ``consortia/<name>:<version>``
(the recipe folder plus the ``algorithms`` and ``wire`` packages). ``<h>`` hashes what goes into the
layer, so a layer is rebuilt only when its recipe, the wheels or its parent change. The **image
digest** is the engine's content-addressed image id (``sha256:...``), what the ledger's Image record
and a learning process pin. For the sandbox runtime the same files are a **bundle** directory
(:mod:`.bundle`), whose digest covers its files and the interpreter it runs with.

* :mod:`.build` -- ``consortia image build``: build, check what was built, push, register (one step);
* :mod:`.reference`, :mod:`.registry`, :mod:`.bundle_archive` -- distribution through the
  consortium's OCI registry: references by digest, images pushed and pulled through the engine,
  bundles as content-addressed archives;
* :mod:`.resolver` -- where the image a process pins is on this node, fetched when absent, and the
  check that it is the pinned one;
* :mod:`.declarations` -- what an image declares (its input), and the one check of a process against it.
"""

"""CollabDict (seed 000/001; docs/collabdict.md): decentralised collaborative anomaly detection with a
sparse GGM mixture (:mod:`.ggm`) or a multi-task VAE (:mod:`.vae`), aggregated by dynamical consensus or an
exact random-chunk sum (:mod:`.aggregation`), with anomaly scores (:mod:`.scores`), the Rényi-DP constant
and the entropy ℓ-diversity monitor (:mod:`.privacy`)."""

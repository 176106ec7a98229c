"""Writers as Dask graphs: the vertex stage every kind shares (:mod:`.vertices`), point
clouds (:mod:`.points`) and the linked kinds (:mod:`.linked`)."""

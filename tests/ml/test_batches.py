import numpy as np
import torch

from gclab.coding.contract import Part
from gclab.ml.batches import BatchPlan, augment, part_bounds, shard_indices


def test_shards_partition_the_training_set_exactly_once():
    shards = shard_indices(1003, 7, seed=3)
    allidx = np.concatenate(shards)
    assert len(allidx) == 1003 and len(np.unique(allidx)) == 1003
    assert max(map(len, shards)) - min(map(len, shards)) <= 1


def test_batches_depend_only_on_seed_job_shard_and_cover_an_epoch():
    plan = BatchPlan(shard_sizes=(40, 40), per_shard=8, seed=1)
    assert plan.steps_per_epoch == 5
    epoch = np.concatenate([plan.positions(j, Part(0)) for j in range(5)])
    assert sorted(epoch) == list(range(40))  # every sample of the shard once per epoch
    again = BatchPlan(shard_sizes=(40, 40), per_shard=8, seed=1)
    assert np.array_equal(plan.positions(3, Part(1)), again.positions(3, Part(1)))
    assert not np.array_equal(plan.positions(0, Part(0)), plan.positions(5, Part(0)))


def test_parts_of_a_shard_tile_its_samples_and_augmentation():
    plan = BatchPlan(shard_sizes=(50,), per_shard=10, seed=0)
    whole = plan.positions(2, Part(0))
    halves = [Part(0, 0.0, 0.3), Part(0, 0.3, 1.0)]
    assert np.array_equal(np.concatenate([plan.positions(2, p) for p in halves]), whole)
    offsets, flips = plan.augmentation(2, Part(0))
    split = [plan.augmentation(2, p) for p in halves]
    assert np.array_equal(np.concatenate([s[0] for s in split]), offsets)
    assert np.array_equal(np.concatenate([s[1] for s in split]), flips)
    assert part_bounds(Part(0, 0.3, 1.0), 10) == (3, 10)


def test_augment_crops_and_flips_like_the_per_image_recipe():
    x = torch.randint(0, 255, (3, 3, 8, 8), dtype=torch.uint8)
    offsets = np.array([[4, 4], [0, 8], [2, 1]])
    flips = np.array([False, True, True])
    out = augment(x, offsets, flips)
    padded = torch.nn.functional.pad(x, (4, 4, 4, 4))
    for i in range(3):
        r, c = offsets[i]
        want = padded[i, :, r : r + 8, c : c + 8]
        if flips[i]:
            want = want.flip(-1)
        assert torch.equal(out[i], want)
    assert torch.equal(out[0], x[0])  # centre crop, no flip: unchanged

import torch

seed = 0
features = 6
batch_size = 4
momentum = 0.1
steps = 20
minibatch = 8
mean = 3.0  # the population the training mini-batches are drawn from
std = 2.0
torch.manual_seed(seed)
bn = torch.nn.BatchNorm1d(features, momentum=momentum, affine=False)
ln = torch.nn.LayerNorm(features, elementwise_affine=False)

# One fixed sample, then re-draw its batch-mates: «header»
x = torch.randn(batch_size, features)
bn_before, ln_before = bn(x)[0], ln(x)[0]
x[1:] = torch.randn(batch_size - 1, features)
ln_same, bn_same = torch.equal(ln(x)[0], ln_before), torch.allclose(bn(x)[0], bn_before)
print(ln_same, bn_same)  # True «bn_same»

# A batch of one: BatchNorm in training mode refuses, LayerNorm does not.
try:
    bn(x[:1])
except ValueError as err:
    refused = str(err)
    print(refused)  # Expected more than 1 value per channel when training, ...

# «steps» training mini-batches of «minibatch» update the running statistics ...
bn.reset_running_stats()
for _ in range(steps):
    batch = mean + std * torch.randn(minibatch, features)
    out_train = bn(batch)  # normalized with the batch's biased variance
print(bn.running_mean, bn.running_var)  # fed the unbiased variance
# ... which evaluation mode uses instead of the batch's own statistics.
bn.eval()
gap = (bn(batch) - out_train).abs().max()
print(gap)  # not 0

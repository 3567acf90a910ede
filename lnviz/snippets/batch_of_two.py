import torch
import torch.nn.functional as F

# (batch, words, embedding) = (2, 2, 3): the notes' sample, then a second one
notes_sample = [[0.2, 0.1, 0.3], [0.5, 0.1, 0.1]]
second_sample = [[0.9, 0.7, 0.8], [0.3, 0.6, 0.9]]
inputs = torch.tensor([notes_sample, second_sample])
batch_size, sequence_size, embedding_size = inputs.shape
reshaped = inputs.reshape(sequence_size, batch_size, embedding_size)  # the notes' line
permuted = inputs.permute(1, 0, 2)  # what it meant: (words, batch, embedding)
print(torch.equal(reshaped, permuted))  # False: reshape only relabels memory
print(reshaped[0, 1].tolist())  # sample 0's word 1, filed as word 0 of sample 1

alone = F.layer_norm(inputs[:1].permute(1, 0, 2), (1, 3))[:, 0]  # the notes: batch of one
pooled = F.layer_norm(permuted, (2, 3))[:, 0]  # dims=(-2, -1): sample 0 beside sample 1
per_word = F.layer_norm(permuted, (3,))[:, 0]  # dims=-1: one μ per word of each sample
print((pooled - alone).abs().max().item() > 0.1)  # True: sample 1 moved sample 0's output
print(torch.allclose(per_word, alone))  # True: over the last dim alone, nothing is shared

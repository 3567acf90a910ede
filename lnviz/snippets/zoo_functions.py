# The Bug zoo's seven LayerNorms, shown to the learner exactly as written here: plain code as it
# is found in the wild, where no comment gives a slip away (the page's feedback does).
import torch


def layer_norm_a(x, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps)


def layer_norm_b(x, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / (torch.sqrt(var) + eps)


def layer_norm_c(x, eps=1e-5):
    mean = x.mean(dim=0, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=0, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps)


def layer_norm_d(x, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps)


def layer_norm_e(x, eps=1e-5):
    dims = (-2, -1)
    mean = x.mean(dim=dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps)


def layer_norm_f(x, eps=1e-5):
    seq, batch, emb = x.shape
    tokens = x.reshape(emb, seq * batch)  # one column per token
    mean = tokens.mean(dim=0, keepdim=True)
    var = ((tokens - mean) ** 2).mean(dim=0, keepdim=True)
    y = (tokens - mean) / torch.sqrt(var + eps)
    return y.reshape(seq, batch, emb)


def layer_norm_g(x, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = (x * x).mean(dim=-1, keepdim=True) - mean * mean
    return (x - mean) / torch.sqrt(var + eps)

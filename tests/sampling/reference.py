"""Float64, one-request-at-a-time reference of speculative sampling (the textbook loop)."""

import torch

PLACEHOLDER = -1


def reference_rejection_sample(draft_token_ids, num_draft_tokens, target_logits, bonus_token_ids,
                               is_greedy, draft_probs, uniforms, recovery_noise):
    batch = len(num_draft_tokens)
    spec_len = max(num_draft_tokens, default=0)
    out = torch.full((batch, spec_len + 1), PLACEHOLDER, dtype=torch.int32)
    start = 0
    for b in range(batch):
        n = num_draft_tokens[b]
        emitted = []
        for j in range(n):
            t = start + j
            x = int(draft_token_ids[t])
            logits = target_logits[t].double()
            if bool(is_greedy[b]):
                best = int(torch.argmax(logits))
                if x == best:
                    emitted.append(x)
                    continue
                emitted.append(best)
                break
            p = torch.softmax(logits, -1)
            if draft_probs is None:
                q = torch.zeros_like(p)
                q[x] = 1.0
            else:
                q = draft_probs[t].double()
            if q[x] > 0 and p[x] >= float(uniforms[t]) * q[x]:
                emitted.append(x)
                continue
            residual = (p - q).clamp_min(0)
            if draft_probs is None:
                residual = p.clone()
                residual[x] = 0
            if residual.sum() <= 0:
                residual = p
            emitted.append(int(torch.argmax(residual / recovery_noise[b].double())))
            break
        else:
            emitted.append(int(bonus_token_ids.reshape(-1)[b]))
        out[b, :len(emitted)] = torch.tensor(emitted, dtype=torch.int32)
        start += n
    return out

/* The free blocks of one (pool, size class), ordered by (size, address): a
 * treap, so best fit ("the smallest block of at least n bytes") is answered
 * exactly in O(log n) expected, and, being intrusive, inserting never
 * allocates and returning memory can never fail. Ties go to the lower address,
 * which helps coalescing. docs/memory.md, "Segments, blocks and size classes". */
#include <stddef.h>

#include "backend/memory_internal.h"

static int less(const kk__mem_block *a, const kk__mem_block *b) {
    return a->size < b->size || (a->size == b->size && a->addr < b->addr);
}

/* splitmix64 of the address: deterministic, well spread, no RNG state. */
static uint64_t priority(uintptr_t addr) {
    uint64_t z = (uint64_t)addr + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Split `t` into the keys below `k` (*l) and the rest (*r). */
static void split(kk__mem_block *t, const kk__mem_block *k, kk__mem_block **l, kk__mem_block **r) {
    if (!t) {
        *l = *r = NULL;
    } else if (less(t, k)) {
        split(t->right, k, &t->right, r);
        *l = t;
    } else {
        split(t->left, k, l, &t->left);
        *r = t;
    }
}

/* Join two treaps where every key of `l` is below every key of `r`. */
static kk__mem_block *join(kk__mem_block *l, kk__mem_block *r) {
    if (!l) return r;
    if (!r) return l;
    if (l->prio > r->prio) {
        l->right = join(l->right, r);
        return l;
    }
    r->left = join(l, r->left);
    return r;
}

void kk__mem_tree_insert(kk__mem_block **root, kk__mem_block *b) {
    b->prio = priority(b->addr);
    b->left = b->right = NULL;
    kk__mem_block **at = root;
    while (*at && (*at)->prio >= b->prio) at = less(b, *at) ? &(*at)->left : &(*at)->right;
    split(*at, b, &b->left, &b->right);
    *at = b;
}

void kk__mem_tree_remove(kk__mem_block **root, kk__mem_block *b) {
    kk__mem_block **at = root;
    while (*at && *at != b) at = less(b, *at) ? &(*at)->left : &(*at)->right;
    if (!*at) return; /* not in the tree: kk__mem_check reports such a state */
    *at = join(b->left, b->right);
    b->left = b->right = NULL;
}

kk__mem_block *kk__mem_tree_lower_bound(kk__mem_block *root, size_t size) {
    kk__mem_block *best = NULL;
    for (kk__mem_block *t = root; t;) {
        if (t->size >= size) {
            best = t;
            t = t->left;
        } else {
            t = t->right;
        }
    }
    return best;
}

kk__mem_block *kk__mem_tree_next(kk__mem_block *root, const kk__mem_block *b) {
    kk__mem_block *best = NULL;
    for (kk__mem_block *t = root; t;) {
        if (less(b, t)) {
            best = t;
            t = t->left;
        } else {
            t = t->right;
        }
    }
    return best;
}

/* In-order walk checking order and heap property; counts nodes. */
static long check(const kk__mem_block *t, const kk__mem_block **last, int depth) {
    if (!t) return 0;
    if (depth > 10000) return -1; /* a cycle */
    if ((t->left && t->left->prio > t->prio) || (t->right && t->right->prio > t->prio)) return -1;
    long l = check(t->left, last, depth + 1);
    if (l < 0) return -1;
    if (*last && !less(*last, t)) return -1;
    *last = t;
    long r = check(t->right, last, depth + 1);
    return r < 0 ? -1 : l + r + 1;
}

long kk__mem_tree_check(const kk__mem_block *root) {
    const kk__mem_block *last = NULL;
    return check(root, &last, 0);
}

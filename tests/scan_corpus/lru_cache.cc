// A sharded LRU cache of values with handles; a handle pins its entry until released.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

struct CacheEntry {
    std::string key;
    char *value;
    size_t charge;
    int refs;
    bool in_cache;
};

// The cache: entries up to capacity bytes of charge, evicted least recently used first.
class LRUCache {
  public:
    explicit LRUCache(size_t capacity) : capacity_(capacity), usage_(0) {}

    CacheEntry *Lookup(const std::string &key)
    {
        std::lock_guard<std::mutex> guard(mu_);
        auto it = table_.find(key);
        if (it == table_.end())
            return nullptr;
        CacheEntry *e = it->second;
        e->refs++;
        lru_.remove(e);
        lru_.push_front(e);
        return e;
    }

    CacheEntry *Insert(const std::string &key, const char *value, size_t charge)
    {
        std::lock_guard<std::mutex> guard(mu_);
        while (usage_ + charge > capacity_ && !lru_.empty())
            EvictOne();
        CacheEntry *e = new CacheEntry{key, new char[charge], charge, 2, true};
        std::memcpy(e->value, value, charge);
        table_[key] = e;
        lru_.push_front(e);
        usage_ += charge;
        return e;
    }

    void Release(CacheEntry *e)
    {
        std::lock_guard<std::mutex> guard(mu_);
        e->refs--;
        if (e->refs == 0) {
            usage_ -= e->charge;
            delete[] e->value;
            delete e;
        }
    }

    const char *Value(CacheEntry *e) const { return e->value; }

    size_t Usage() const { return usage_; }

  private:
    void EvictOne()
    {
        CacheEntry *victim = lru_.back();
        lru_.pop_back();
        table_.erase(victim->key);
        victim->in_cache = false;
        victim->refs--;
        if (victim->refs == 0) {
            usage_ -= victim->charge;
            delete[] victim->value;
            delete victim;
        }
    }

    size_t capacity_;
    size_t usage_;
    std::list<CacheEntry *> lru_;
    std::unordered_map<std::string, CacheEntry *> table_;
    std::mutex mu_;
};
